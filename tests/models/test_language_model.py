"""models.language_model: curves, optimizers, data, model (used by the LM experiments)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxpapers import models


def test_steps_to_reach_interpolates_between_evaluations():
  records = [{"step": s, "valid_bpb": v}
             for s, v in [(0, 5.0), (10, 3.0), (20, 2.0), (30, 1.5)]]
  assert models.steps_to_reach(records, 2.5) == pytest.approx(15.0)
  assert models.steps_to_reach(records, 3.0) == 10.0
  assert models.steps_to_reach(records, 6.0) == 0.0
  assert models.steps_to_reach(records, 1.0) is None
  losses = [{"step": r["step"], "loss": r["valid_bpb"]} for r in records]
  assert models.steps_to_reach(losses, 2.5, key="loss") == pytest.approx(15.0)


@pytest.mark.usefixtures("standard_dtype_promotion")  # optax's schedule-free
def test_optimizer_maps_of_lookahead_and_schedule_free():
  params = {"w": jnp.arange(3.0)}
  plain = models.Optimizer(optax.sgd(0.1))
  assert plain.wrap_params(params) is params
  assert plain.gradient_point(params) is params
  assert plain.eval_params(params, None) is params

  look = models.lookahead(optax.sgd(1.0), sync_period=2, slow_step_size=0.5)
  held = look.wrap_params(params)
  state = look.tx.init(held)
  updates, state = look.tx.update({"w": jnp.ones(3)}, state, held)
  held = optax.apply_updates(held, updates)  # one fast step, no sync yet
  np.testing.assert_array_equal(look.gradient_point(held)["w"],
                                params["w"] - 1.0)
  np.testing.assert_array_equal(look.eval_params(held, state)["w"],
                                params["w"])

  free = models.schedule_free(optax.contrib.schedule_free_sgd(0.1))
  y, state = params, free.tx.init(params)
  for _ in range(3):  # x and y part after the first step
    updates, state = free.tx.update({"w": jnp.ones(3)}, state, y)
    y = optax.apply_updates(y, updates)
  x = free.eval_params(y, state)["w"]
  np.testing.assert_array_equal(
      x, optax.contrib.schedule_free_eval_params(state, y)["w"])
  assert not np.allclose(x, y["w"])


def test_train_chunk_takes_the_gradient_at_the_gradient_point():
  tokens = jnp.arange(64, dtype=jnp.int32) % 7

  def objective(params, windows):
    del windows  # a loss of the params alone
    return jnp.sum(params["w"] ** 2), {}

  shifted = models.Optimizer(optax.sgd(0.5), gradient_point=lambda p: {
      "w": p["w"] + 1.0})
  params, _, loss, _ = models.train_chunk(
      objective, shifted, {"w": jnp.zeros(2)}, shifted.tx.init(
          {"w": jnp.zeros(2)}), tokens, jax.random.key(0), jnp.int32(0),
      num_steps=1, batch_size=2, length=4)
  # Gradient of |w + 1|^2 at w = 0 is 2; one SGD step of 0.5 gives -1.
  np.testing.assert_allclose(params["w"], [-1.0, -1.0])
  assert float(loss) == pytest.approx(2.0)


@pytest.mark.slow  # a training loop: compile-bound
@pytest.mark.usefixtures("standard_dtype_promotion")  # optax.lookahead
def test_lm_trainer_matches_train_chunk_and_validates_at_both_points():
  model = models.LanguageModel(models.TransformerConfig(
      max_len=4, d_model=8, num_heads=2, num_layers=1, d_ff=8))
  tokens = jnp.arange(64, dtype=jnp.int32) % 7
  windows = models.validation_windows(np.asarray(tokens), 4, 4)
  family = lambda lr: models.lookahead(optax.sgd(lr), sync_period=2,
                                       slow_step_size=0.5)
  trainer = models.LMTrainer(model, family, chunk_steps=2, batch_size=2,
                             length=4)
  state = trainer.init(0, 0.1)
  state, loss = trainer.chunk(state, (0.1,), tokens, jax.random.key(1), 3)
  # The same steps through train_chunk with a concrete learning rate.
  opt = family(0.1)
  held = opt.wrap_params(model.init(0))
  held, _, expected_loss, _ = models.train_chunk(
      model.loss, opt, held, opt.tx.init(held), tokens, jax.random.key(1),
      jnp.int32(3), num_steps=2, batch_size=2, length=4)
  np.testing.assert_allclose(loss, expected_loss, rtol=1e-5)
  at_eval, at_grad = trainer.validate(state, (0.1,), windows, 2)
  # Lookahead validates the slow weights; its gradient point is the fast.
  np.testing.assert_allclose(at_eval, models.mean_loss(model, held.slow, windows, 2),
                             rtol=1e-5)
  np.testing.assert_allclose(at_grad, models.mean_loss(model, held.fast, windows, 2),
                             rtol=1e-5)
  assert float(at_eval) != float(at_grad)


def test_corpus_arrays_and_model_metadata():
  corpus = models.load_corpus(source_files=1, valid_fraction=0.3)
  tokens, windows = corpus.arrays(4, 8)
  assert tokens.shape == corpus.train.shape and windows.shape == (4, 9)
  model = models.LanguageModel(models.TransformerConfig(
      max_len=8, d_model=8, num_heads=2, num_layers=1, d_ff=16))
  meta = model.metadata()
  assert meta["num_params"] == sum(
      x.size for x in jax.tree.leaves(model.init(0)))
  assert meta["config"]["d_model"] == 8
  assert meta["architecture"].endswith("GELU MLP")
  loss = models.mean_loss(model, model.init(0), windows, 2)
  assert 0.0 < float(loss) < 2 * np.log(257)
  with pytest.raises(ValueError, match="multiple of batch_size=3"):
    models.mean_loss(model, model.init(0), windows, 3)
