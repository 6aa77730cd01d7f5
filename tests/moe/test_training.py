"""MoE LM training steps (a chunk is its steps, a step is by hand); subset scores."""

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxpapers import models
from jaxpapers import moe
from jaxpapers.data import _text as text

TOKENS = jnp.asarray(np.random.default_rng(0).integers(0, 256, 512), jnp.int32)
KEYS = dict(data_key=jax.random.key(1), pool_key=jax.random.key(2))


def _setup():
  model = models.Transformer(
      models.TransformerConfig(vocab_size=text.VOCAB_SIZE, max_len=8,
                               d_model=8, num_heads=1, num_layers=2, d_ff=8),
      rngs=nnx.Rngs(0), ffn_factory=moe.moe_ffn_factory(moe.MoEConfig(
          num_experts=4, k=2, d_hidden=8, routing="emo", pool_size=(2, 4))))
  graphdef, params, rest = nnx.split(model, nnx.Param, ...)
  tx = optax.sgd(0.1)
  return graphdef, rest, tx, (params, tx.init(params))


def _steps(state, first, num, setup):
  graphdef, rest, tx, _ = setup
  return moe.train_steps(state, rest, TOKENS, graphdef=graphdef, tx=tx,
                         first_step=first, num_steps=num, batch_size=2,
                         context=8, **KEYS)


@pytest.mark.slow  # a training loop: compile-bound
def test_a_chunk_is_its_steps_one_by_one_and_a_step_is_by_hand():
  setup = _setup()
  graphdef, rest, _, state = setup
  whole, parts = _steps(state, 0, 2, setup)
  first, first_parts = _steps(state, 0, 1, setup)
  second, second_parts = _steps(first, 1, 1, setup)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5,
                                                       atol=1e-6),
               whole[0], second[0])
  np.testing.assert_allclose(parts["ce"],
                             (first_parts["ce"] + second_parts["ce"]) / 2,
                             rtol=1e-5)
  # Step 0 by hand: its windows, its pools, the EMO objective, one SGD step.
  windows = text.sample_windows(jax.random.fold_in(KEYS["data_key"], 0),
                                TOKENS, 2, 8)

  def loss(params):
    model = nnx.merge(graphdef, params, rest, copy=True)
    nnx.reseed(model, pool=jax.random.fold_in(KEYS["pool_key"], 0))
    logits, aux = model(windows[:, :-1], text.segment_ids(windows[:, :-1]))
    return moe.training_loss(logits, windows[:, 1:], aux, num_layers=2)

  (_, by_hand), grads = jax.value_and_grad(loss, has_aux=True)(state[0])
  expected = jax.tree.map(lambda p, g: p - 0.1 * g, state[0], grads)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4,
                                                       atol=1e-6),
               first[0], expected)
  np.testing.assert_allclose(first_parts["ce"], by_hand["ce"], rtol=1e-5)


@pytest.mark.slow  # a training loop: compile-bound
def test_subset_bits_per_byte_scores_the_full_and_pruned_models():
  graphdef, rest, _, (params, _) = _setup()
  model = nnx.merge(graphdef, params, rest)
  windows = text.sample_windows(jax.random.key(3), TOKENS, 2, 8)
  calibration = windows[:, :8]
  out = moe.subset_bits_per_byte(model, windows, calibration, [1, 3],
                                 rng=np.random.default_rng(5))

  def bits(m):
    logits, _ = nnx.view(m, deterministic=True)(
        windows[:, :-1], text.segment_ids(windows[:, :-1]))
    return float(models.next_token_loss(logits, windows[:, 1:])) / np.log(2)

  assert out["full_bpb"] == pytest.approx(bits(model), rel=1e-5)
  assert out["usage"].shape == (2, 4)
  np.testing.assert_allclose(out["usage"].sum(-1), 1.0, rtol=1e-5)
  draws = np.random.default_rng(5)
  for count, subset in zip([1, 3], out["subsets"]):
    kept = moe.select_experts(model, calibration,
                              text.segment_ids(calibration), num_experts=count)
    assert subset["kept"] == [k.tolist() for k in kept]
    assert subset["bpb"] == pytest.approx(
        bits(moe.prune_experts(model, kept)), rel=1e-5)
    drawn = [np.sort(draws.choice(4, count, replace=False)) for _ in kept]
    assert subset["random_bpb"] == pytest.approx(
        bits(moe.prune_experts(model, drawn)), rel=1e-5)
