"""Byte-level language-model training on Python's own text, for LM experiments.

The pieces an LM experiment needs besides its optimizer: the corpus (pydoc
topics prose and standard-library source, a fixed document split), the
shared :class:`jaxpapers.models.Transformer` viewed as a pure function of a
dict of params, a warmup-stable-decay schedule, Muon's split of those params,
an :class:`Optimizer` record for wrappers that hold more than the params
(:func:`lookahead`, :func:`schedule_free`), fixed validation windows and a
jitted validation loss, a ``lax.scan`` chunk of training steps whose
batches are pure functions of ``(data_key, step)``, so a resumed run sees the
same batches, and the steps a loss curve takes to reach a target. Any
``ffn_factory`` (e.g. a mixture of experts) plugs in; its auxiliary outputs
are averaged over the chunk.
"""

import dataclasses
import functools
from typing import Any, Callable, NamedTuple

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxpapers import models
from jaxpapers.data import text


class Corpus(NamedTuple):
  train: np.ndarray  # int32 tokens (bytes and EOS)
  valid: np.ndarray
  provenance: str

  def arrays(self, num_valid_windows: int, length: int
             ) -> tuple[jax.Array, jax.Array]:
    """Training tokens on device and :func:`validation_windows` of ``valid``."""
    return (jnp.asarray(self.train),
            validation_windows(self.valid, num_valid_windows, length))


def load_corpus(*, source_files: int | None, valid_fraction: float,
                seed: int = 0) -> Corpus:
  """pydoc topics plus the first ``source_files`` stdlib files, split by document."""
  docs = text.python_docs_documents() + text.python_source_documents(source_files)
  train, valid = text.split_documents(docs, valid_fraction, seed=seed)
  provenance = text.provenance(
      f"{len(docs)} documents (pydoc topics + {source_files or 'all'} stdlib"
      f" files), {len(valid)} held out")
  return Corpus(text.encode_documents(train), text.encode_documents(valid),
                provenance)


class LanguageModel:
  """The nnx Transformer as a pure function of a nested dict of params."""

  def __init__(self, config: models.TransformerConfig, *,
               ffn_factory: models.transformer.FFNFactory = models.dense_ffn):
    self.config = config
    self._ffn_factory = ffn_factory
    abstract = nnx.eval_shape(lambda: self._module(0))
    self._graphdef, state = nnx.split(abstract)
    self._treedef = jax.tree.structure(state)

  def _module(self, seed) -> models.Transformer:
    return models.Transformer(self.config, rngs=nnx.Rngs(seed),
                              ffn_factory=self._ffn_factory)

  def init(self, seed: int) -> dict[str, Any]:
    """Fresh params as a nested dict of arrays (what optimizers see)."""
    return self._init(jax.random.key(seed))

  @functools.partial(jax.jit, static_argnums=0)
  def _init(self, key):
    # One compiled program instead of one per initializer op.
    _, state = nnx.split(self._module(key))
    return nnx.to_pure_dict(state)

  def apply(self, params: dict[str, Any], tokens_BxL: jax.Array):
    """``(logits_BxLxV, aux)``; attention stays inside documents."""
    state = jax.tree.unflatten(self._treedef, jax.tree.leaves(params))
    module = nnx.merge(self._graphdef, state)
    return module(tokens_BxL, text.segment_ids(tokens_BxL))

  def loss(self, params: dict[str, Any], windows_BxL1: jax.Array):
    """Next-token cross-entropy (nats/token) of ``(B, L+1)`` windows, and aux."""
    logits, aux = self.apply(params, windows_BxL1[:, :-1])
    return models.next_token_loss(logits, windows_BxL1[:, 1:]), aux

  def metadata(self) -> dict[str, Any]:
    """What a report says about the model: architecture, sizes, parameters."""
    ffn = ("GELU MLP" if self._ffn_factory is models.dense_ffn else
           getattr(self._ffn_factory, "__name__", "custom FFN"))
    return {"architecture": "decoder-only transformer (jaxpapers.models."
                            "Transformer): pre-norm RMSNorm, learned positions,"
                            f" tied embeddings, {ffn}",
            "config": dataclasses.asdict(self.config),
            "num_params": sum(x.size for x in jax.tree.leaves(self.init(0)))}


def wsd_schedule(peak: float, *, num_steps: int, warmup_steps: int,
                 decay_start: int) -> optax.Schedule:
  """Warmup-stable-decay: linear warm-up, constant, linear decay to 0 at the end."""

  def schedule(step):
    t = jnp.asarray(step).astype(jnp.float32)
    warm = (t + 1) / warmup_steps
    decay = (num_steps - t) / (num_steps - decay_start)
    return peak * jnp.clip(jnp.minimum(warm, decay), 0.0, 1.0)

  return schedule


def muon_dimension_numbers(params: dict[str, Any]) -> Any:
  """Muon for the 2-D hidden matrices; embeddings and vectors go to its Adam.

  Pass it as ``muon_weight_dimension_numbers`` of ``optax.contrib.muon`` for
  the params of a :class:`LanguageModel`.
  """
  def dims(path, x):
    if x.ndim != 2 or "embed" in jax.tree_util.keystr(path):
      return None
    return optax.contrib.MuonDimensionNumbers()
  return jax.tree_util.tree_map_with_path(dims, params)


class Optimizer(NamedTuple):
  """An optax optimizer and how what it holds relates to the model's params.

  Wrappers such as ``optax.lookahead`` (fast and slow weights) or
  schedule-free and EMA-Nesterov (which hold a point other than the one to
  validate) differ from the plain case only in these three maps.
  """

  tx: optax.GradientTransformation
  # (held, opt_state) -> the params to validate.
  eval_params: Callable[[Any, Any], Any] = lambda held, opt_state: held
  # params -> what the optimizer holds.
  wrap_params: Callable[[Any], Any] = lambda params: params
  # held -> the params the gradient is taken at.
  gradient_point: Callable[[Any], Any] = lambda held: held


def lookahead(fast: optax.GradientTransformation, sync_period: int,
              slow_step_size: float) -> Optimizer:
  """``optax.lookahead``: gradients at the fast weights, validation at the slow."""
  return Optimizer(optax.lookahead(fast, sync_period, slow_step_size),
                   eval_params=lambda held, opt_state: held.slow,
                   wrap_params=optax.LookaheadParams.init_synced,
                   gradient_point=lambda held: held.fast)


def schedule_free(tx: optax.GradientTransformation) -> Optimizer:
  """A schedule-free optax optimizer (e.g. ``schedule_free_adamw``), validated at x."""
  return Optimizer(tx, eval_params=lambda held, opt_state: (
      optax.contrib.schedule_free_eval_params(opt_state, held)))


def validation_windows(tokens: np.ndarray, num_windows: int, length: int,
                       seed: int = 0) -> jax.Array:
  """A fixed set of ``(num_windows, length + 1)`` windows (shared by all runs)."""
  return text.sample_windows(jax.random.key(seed), jnp.asarray(tokens),
                             num_windows, length)


@functools.partial(jax.jit, static_argnames=("model", "batch_size"))
def mean_loss(model: LanguageModel, params, windows: jax.Array,
              batch_size: int) -> jax.Array:
  """Mean loss over ``windows``, ``batch_size`` at a time (a multiple of it).

  Jitted with the model static: one compile per model and window shape.
  """
  num = windows.shape[0]
  if num % batch_size:
    raise ValueError(
        f"the {num} validation windows must be a multiple of batch_size="
        f"{batch_size}.")
  batches = windows.reshape(num // batch_size, batch_size, -1)
  return jnp.mean(jax.lax.map(lambda w: model.loss(params, w)[0], batches))


def train_chunk(
    objective: Callable[[Any, jax.Array], tuple[jax.Array, dict[str, Any]]],
    optimizer: Optimizer,
    opt_params: Any,
    opt_state: optax.OptState,
    tokens: jax.Array,
    data_key: jax.Array,
    first_step: jax.Array,
    *,
    num_steps: int,
    batch_size: int,
    length: int,
):
  """``num_steps`` optimizer steps; returns (opt_params, opt_state, mean loss, mean aux).

  Batch ``t`` is drawn from ``fold_in(data_key, t)``; the gradient is taken
  at ``optimizer.gradient_point`` of what the optimizer holds (e.g. the fast
  weights of ``optax.lookahead``).
  """

  def step(carry, t):
    opt_params, opt_state = carry
    windows = text.sample_windows(jax.random.fold_in(data_key, t), tokens,
                                  batch_size, length)
    (loss, aux), grads = jax.value_and_grad(objective, has_aux=True)(
        optimizer.gradient_point(opt_params), windows)
    updates, opt_state = optimizer.tx.update(grads, opt_state, opt_params)
    return (optax.apply_updates(opt_params, updates), opt_state), (loss, aux)

  steps = first_step + jnp.arange(num_steps, dtype=jnp.int32)
  (opt_params, opt_state), (losses, aux) = jax.lax.scan(
      step, (opt_params, opt_state), steps)
  return (opt_params, opt_state, jnp.mean(losses),
          jax.tree.map(jnp.mean, aux))


def steps_to_reach(records: list[dict[str, Any]], target: float, *,
                   key: str = "valid_bpb") -> float | None:
  """First step at which ``record[key] <= target``, or None if never.

  ``records`` are evaluations in step order (dicts with ``"step"``, as a
  harness run's metrics); between two evaluations the step is interpolated
  linearly, as in "steps to reach the baseline's final loss" comparisons.
  """
  steps = [r["step"] for r in records]
  losses = [r[key] for r in records]
  for i, loss in enumerate(losses):
    if loss <= target:
      if i == 0:
        return float(steps[0])
      frac = (losses[i - 1] - target) / (losses[i - 1] - loss)
      return steps[i - 1] + frac * (steps[i] - steps[i - 1])
  return None
