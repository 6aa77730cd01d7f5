r"""EMO's evaluation of an MoE language model and of its expert subsets.

:func:`subset_bits_per_byte` scores a byte-level MoE language model on
held-out windows: its bits per byte (next-token cross-entropy / ln 2), its
expert usage per layer, and the bits per byte of the model pruned to
greedy layerwise subsets of its experts (:func:`jaxpapers.moe.
select_experts`, chosen on calibration tokens of the same domain) and,
optionally, to random subsets of the same size. The question it answers is
EMO's: can a domain be served by a small subset of the experts?

References:
  Wang et al., "EMO: Pretraining Mixture of Experts for Emergent Modularity",
  arXiv:2605.06663, 2026 (code: https://github.com/allenai/EMO).
"""

import math
from typing import Any, Sequence

from flax import nnx
import jax
import numpy as np

from jaxpapers.data import _text as text
from jaxpapers.models._transformer import next_token_loss
from jaxpapers.moe._subsets import moe_layers
from jaxpapers.moe._subsets import prune_experts
from jaxpapers.moe._subsets import run_with_statistics
from jaxpapers.moe._subsets import select_experts


def _bits_per_byte(model, windows_NxL1):
  inputs, targets = windows_NxL1[:, :-1], windows_NxL1[:, 1:]
  (logits, _), stats = run_with_statistics(
      nnx.view(model, deterministic=True), inputs, text.segment_ids(inputs))
  bpb = float(next_token_loss(logits, targets)) / math.log(2)
  return bpb, np.stack([np.asarray(s["expert_load"]) for s in stats])


def subset_bits_per_byte(model: nnx.Module, windows_NxL1: jax.Array,
                         calibration_BxL: jax.Array, num_kept: Sequence[int],
                         *, rng: np.random.Generator | None = None
                         ) -> dict[str, Any]:
  """Held-out bits per byte of a model and of expert subsets of it.

  Args:
    model: a byte-level language model with :class:`jaxpapers.moe.MoE`
      layers, called as ``model(tokens, segment_ids)`` (e.g. a
      :class:`jaxpapers.models.Transformer` with ``moe_ffn_factory``);
      evaluated with routing as at evaluation (``deterministic=True``).
    windows_NxL1: held-out windows of ``L + 1`` tokens (inputs ``[:, :-1]``,
      next-token targets ``[:, 1:]``); documents end with ``EOS``
      (:func:`jaxpapers.data.segment_ids`).
    calibration_BxL: tokens the greedy subsets are chosen on (a few
      documents of the same domain).
    num_kept: per budget, the routed experts each layer keeps (the shared
      expert stays too).
    rng: if given, also scores one random subset of each size per layer,
      drawn in layer order with ``rng.choice(E, n, replace=False)``.

  Returns:
    ``full_bpb`` (float), ``usage`` (``(layers, E)`` NumPy: the fraction of
    (token, slot) pairs routed to each expert) and ``subsets``: per budget
    ``kept`` (per layer, the sorted kept experts as lists), ``bpb`` and, with
    ``rng``, ``random_bpb``.

  Raises:
    ValueError: windows not ``(N, L + 1 >= 2)``, an entry of ``num_kept``
      outside ``[1, E]``, or a model without MoE layers.
    TypeError: ``rng`` neither None nor a ``numpy.random.Generator``.

  Example:
    >>> from flax import nnx
    >>> import jax.numpy as jnp
    >>> from jaxpapers import models, moe
    >>> model = models.Transformer(
    ...     models.TransformerConfig(vocab_size=257, max_len=8, d_model=8,
    ...                              num_heads=1, num_layers=1, d_ff=8),
    ...     rngs=nnx.Rngs(0), ffn_factory=moe.moe_ffn_factory(
    ...         moe.MoEConfig(num_experts=4, k=2, d_hidden=8)))
    >>> tokens = (jnp.arange(2 * 9) % 200).reshape(2, 9)
    >>> out = moe.subset_bits_per_byte(model, tokens, tokens[:, :8], [1])
    >>> out["usage"].shape, [len(layer) for layer in out["subsets"][0]["kept"]]
    ((1, 4), [1])
  """
  if np.ndim(windows_NxL1) != 2 or np.shape(windows_NxL1)[1] < 2:
    raise ValueError(f"windows_NxL1 must be (N, L + 1 >= 2); got shape"
                     f" {np.shape(windows_NxL1)}.")
  if rng is not None and not isinstance(rng, np.random.Generator):
    raise TypeError(f"rng must be a numpy.random.Generator or None; got"
                    f" {type(rng).__name__}.")
  full_bpb, usage = _bits_per_byte(model, windows_NxL1)
  subsets = []
  for count in num_kept:
    kept = select_experts(model, calibration_BxL,
                          text.segment_ids(calibration_BxL), num_experts=count)
    subset = {"kept": [k.tolist() for k in kept],
              "bpb": _bits_per_byte(prune_experts(model, kept),
                                    windows_NxL1)[0]}
    if rng is not None:
      drawn = [np.sort(rng.choice(layer.config.num_experts, count,
                                  replace=False))
               for layer in moe_layers(model)]
      subset["random_bpb"] = _bits_per_byte(prune_experts(model, drawn),
                                            windows_NxL1)[0]
    subsets.append(subset)
  return {"full_bpb": full_bpb, "usage": usage, "subsets": subsets}
