r"""Pretraining steps of an MoE language model (EMO / OLMoE objective).

:func:`train_steps` runs ``num_steps`` optimizer steps under one ``lax.scan``.
Step ``s`` trains on random windows drawn from ``fold_in(data_key, s)`` and,
for EMO routing, samples each document's expert pool from
``fold_in(pool_key, s)`` (the model's ``pool`` RNG stream), so a run resumed
at any step sees the batches and pools it would have seen. The loss is
:func:`jaxpapers.moe.training_loss`.

References:
  Wang et al., "EMO: Pretraining Mixture of Experts for Emergent Modularity",
  arXiv:2605.06663, 2026 (code: https://github.com/allenai/EMO).
"""

import functools
from typing import Any

from flax import nnx
import jax
import jax.numpy as jnp
import optax

from jaxpapers._checks import check_int
from jaxpapers._checks import check_nnx_train_state
from jaxpapers.data import _text as text
from jaxpapers.moe._losses import training_loss
from jaxpapers.moe._subsets import moe_layers


@functools.partial(jax.jit, static_argnames=(
    "graphdef", "tx", "num_steps", "batch_size", "context", "num_layers",
    "weights"))
def _train_steps(state, first_step, rest, tokens, data_key, pool_key, *,
                 graphdef, tx, num_steps, batch_size, context, num_layers,
                 weights):

  def step_fn(state, step):
    params, opt_state = state
    windows = text.sample_windows(jax.random.fold_in(data_key, step), tokens,
                                  batch_size, context)
    inputs, targets = windows[:, :-1], windows[:, 1:]

    def loss(params):
      model = nnx.merge(graphdef, params, rest, copy=True)
      nnx.reseed(model, pool=jax.random.fold_in(pool_key, step))
      logits, aux = model(inputs, text.segment_ids(inputs))
      return training_loss(logits, targets, aux, num_layers=num_layers,
                           **dict(weights))

    (_, parts), grads = jax.value_and_grad(loss, has_aux=True)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return (optax.apply_updates(params, updates), opt_state), parts

  steps = first_step + jnp.arange(num_steps)
  state, parts = jax.lax.scan(step_fn, state, steps)
  return state, jax.tree.map(jnp.mean, parts)


def train_steps(state: tuple[Any, Any], rest: nnx.State, tokens: jax.Array, *,
                graphdef: nnx.GraphDef, tx: optax.GradientTransformation,
                first_step: int | jax.Array, num_steps: int,
                data_key: jax.Array, pool_key: jax.Array, batch_size: int,
                context: int, lm_z_weight: float = 1e-5,
                load_balance_weight: float = 0.1,
                router_z_weight: float = 0.001
                ) -> tuple[tuple[Any, Any], dict[str, jax.Array]]:
  """``num_steps`` optimizer steps of an MoE language model from ``first_step``.

  Args:
    state: ``(params, opt_state)``: the model's ``nnx.Param`` state and
      ``tx``'s state of it.
    rest: the model's other state (``nnx.split(model, nnx.Param, ...)[2]``:
      RNG streams, masks).
    tokens: the 1-D training token stream.
    graphdef: the model's graph (a :class:`jaxpapers.models.Transformer`
      with MoE feed-forward layers, called as ``model(tokens, segment_ids)``).
    tx: the optax optimizer (static under ``jit``: reuse one object to
      compile once).
    first_step: the step of the first batch.
    num_steps: how many steps, ``>= 1``.
    data_key: step ``s`` draws its ``batch_size`` windows of ``context + 1``
      tokens from ``fold_in(data_key, s)`` (:func:`jaxpapers.data._text.
      sample_windows`); documents are separated by ``EOS``.
    pool_key: step ``s`` reseeds the model's ``pool`` stream with
      ``fold_in(pool_key, s)`` (EMO's per-document expert pools).
    batch_size, context: windows per step and their input length.
    lm_z_weight, load_balance_weight, router_z_weight: the loss weights of
      :func:`jaxpapers.moe.training_loss` (the router losses averaged over
      the model's MoE layers).

  Returns:
    The new ``(params, opt_state)`` and the steps' mean loss parts (``ce``,
    ``load_balance``, ``router_z`` of :func:`jaxpapers.moe.training_loss`).

  Raises:
    TypeError: ``state`` not a ``(params, opt_state)`` pair, or ``graphdef``
      not an ``nnx.GraphDef``.
    ValueError: ``num_steps``, ``batch_size`` or ``context`` not an int
      >= 1, a model without MoE layers, or as
      :func:`jaxpapers.moe.training_loss` and
      :func:`jaxpapers.data.sample_windows`.

  Example:
    >>> from flax import nnx
    >>> import jax, jax.numpy as jnp, optax
    >>> from jaxpapers import models, moe
    >>> model = models.Transformer(
    ...     models.TransformerConfig(vocab_size=257, max_len=8, d_model=8,
    ...                              num_heads=1, num_layers=1, d_ff=8),
    ...     rngs=nnx.Rngs(0), ffn_factory=moe.moe_ffn_factory(
    ...         moe.MoEConfig(num_experts=4, k=2, d_hidden=8)))
    >>> graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    >>> tx = optax.sgd(0.1)
    >>> state, parts = moe.train_steps(
    ...     (params, tx.init(params)), rest, jnp.arange(64) % 256,
    ...     graphdef=graphdef, tx=tx, first_step=0, num_steps=2,
    ...     data_key=jax.random.key(1), pool_key=jax.random.key(2),
    ...     batch_size=2, context=8)
    >>> sorted(parts)
    ['ce', 'load_balance', 'router_z']
  """
  check_nnx_train_state(state, graphdef)
  for name, value in (("num_steps", num_steps), ("batch_size", batch_size),
                      ("context", context)):
    check_int(name, value, 1)
  num_layers = len(moe_layers(nnx.merge(graphdef, state[0], rest, copy=True)))
  weights = (("lm_z_weight", lm_z_weight),
             ("load_balance_weight", load_balance_weight),
             ("router_z_weight", router_z_weight))
  return _train_steps(state, first_step, rest, tokens, data_key, pool_key,
                      graphdef=graphdef, tx=tx, num_steps=num_steps,
                      batch_size=batch_size, context=context,
                      num_layers=num_layers, weights=weights)
