"""track_batch_sharpness: closed form, running means, and optax composition."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxpapers import optim


def _loss(w, batch):
  x, y = batch
  return 0.5 * jnp.mean((x @ w - y) ** 2)


def _batches(num_steps=6, b=8, d=3, seed=0):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(num_steps, b, d)).astype(np.float32)
  y = rng.normal(size=(num_steps, b)).astype(np.float32)
  return [(jnp.asarray(x[t]), jnp.asarray(y[t])) for t in range(num_steps)]


def _closed_form(w, batch):
  x, y = (np.asarray(a, np.float64) for a in batch)
  h = x.T @ x / len(y)
  g = x.T @ (x @ np.asarray(w, np.float64) - y) / len(y)
  return (g @ h @ g) / (g @ g)


def _run(tx, batches, w0, pass_grad=False):
  """Trains with tx, returning per-step closed-form sharpness and the states."""
  state = tx.init(w0)
  update = jax.jit(tx.update, static_argnames=("value_fn",))
  w, expected, states = w0, [], []
  for batch in batches:
    g = jax.grad(_loss)(w, batch)
    expected.append(_closed_form(w, batch))
    extra = {"grad": g} if pass_grad else {}
    updates, state = update(g, state, w, value_fn=_loss, batch=batch, **extra)
    w = optax.apply_updates(w, updates)
    states.append(state)
  return np.array(expected), states, w


@pytest.mark.parametrize("pass_grad", [False, True])
def test_arithmetic_running_mean_matches_closed_form(pass_grad):
  tx = optax.chain(optim.track_batch_sharpness(), optax.sgd(0.1))
  expected, states, _ = _run(tx, _batches(), jnp.ones(3), pass_grad)
  got = [float(optax.tree.get(s, "batch_sharpness")) for s in states]
  np.testing.assert_allclose(got, expected, rtol=1e-4)
  means = [float(optax.tree.get(s, "batch_sharpness_mean")) for s in states]
  np.testing.assert_allclose(means, np.cumsum(expected) / np.arange(1, 7),
                             rtol=1e-4)
  assert int(optax.tree.get(states[-1], "count")) == 6


def test_debiased_ema():
  decay = 0.8
  tx = optax.chain(optim.track_batch_sharpness(decay=decay), optax.sgd(0.1))
  expected, states, _ = _run(tx, _batches(), jnp.ones(3))
  raw, ema = 0.0, []
  for t, s in enumerate(expected, start=1):
    raw = decay * raw + (1 - decay) * s
    ema.append(raw / (1 - decay**t))
  got = [float(optax.tree.get(s, "batch_sharpness_mean")) for s in states]
  np.testing.assert_allclose(got, ema, rtol=1e-4)


@pytest.mark.usefixtures("standard_dtype_promotion")
def test_updates_pass_through_unchanged():
  batches = _batches()
  with_tracker = optax.chain(optim.track_batch_sharpness(), optax.adam(0.05))
  _, _, w_tracked = _run(with_tracker, batches, jnp.ones(3))
  plain = optax.adam(0.05)
  state, w = plain.init(jnp.ones(3)), jnp.ones(3)
  for batch in batches:
    updates, state = plain.update(jax.grad(_loss)(w, batch), state, w)
    w = optax.apply_updates(w, updates)
  np.testing.assert_allclose(w_tracked, w, rtol=1e-6)
  tracker = optim.track_batch_sharpness()
  g = jax.grad(_loss)(w, batches[0])
  passed, _ = jax.jit(tracker.update, static_argnames=("value_fn",))(
      g, tracker.init(w), w, value_fn=_loss, batch=batches[0])
  np.testing.assert_array_equal(passed, g)


def test_inject_hyperparams_with_traced_decay():
  tx = optax.chain(
      optax.inject_hyperparams(optim.track_batch_sharpness)(decay=0.5),
      optax.sgd(0.1),
  )
  expected, states, _ = _run(tx, _batches(num_steps=2), jnp.ones(3))
  ema2 = (0.5 * 0.5 * expected[0] + 0.5 * expected[1]) / (1 - 0.25)
  got = float(optax.tree.get(states[-1], "batch_sharpness_mean"))
  np.testing.assert_allclose(got, ema2, rtol=1e-4)


@pytest.mark.usefixtures("standard_dtype_promotion")
def test_multi_steps_records_only_on_emitting_steps():
  batches = _batches(num_steps=4)
  tx = optax.MultiSteps(
      optax.chain(optim.track_batch_sharpness(), optax.sgd(0.1)),
      every_k_schedule=2,
  )
  expected, states, _ = _run(tx, batches, jnp.ones(3))
  counts = [int(optax.tree.get(s.inner_opt_state, "count")) for s in states]
  assert counts == [0, 1, 1, 2]
  got = float(optax.tree.get(states[1].inner_opt_state, "batch_sharpness"))
  # Params do not move on the accumulating step, so step 2's curvature is at w0.
  np.testing.assert_allclose(got, expected[1], rtol=1e-4)


@pytest.mark.usefixtures("standard_dtype_promotion")
def test_other_extra_args_are_ignored_and_value_is_consumed_by_others():
  tx = optax.chain(
      optim.track_batch_sharpness(),
      optax.sgd(0.1),
      optax.contrib.reduce_on_plateau(patience=1),
  )
  w = jnp.ones(3)
  batch = _batches(num_steps=1)[0]
  state = tx.init(w)
  loss, g = jax.value_and_grad(_loss)(w, batch)
  _, state = jax.jit(tx.update, static_argnames=("value_fn",))(
      g, state, w, value=loss, value_fn=_loss, batch=batch, unrelated=3)
  np.testing.assert_allclose(
      float(optax.tree.get(state, "batch_sharpness")), _closed_form(w, batch),
      rtol=1e-4)


def test_zero_gradient_gives_visible_nan():
  tx = optim.track_batch_sharpness()
  x = jnp.eye(3)
  w = jnp.zeros(3)
  _, state = tx.update(w, tx.init(w), w, value_fn=_loss, batch=(x, jnp.zeros(3)))
  assert np.isnan(float(state.batch_sharpness))


def test_missing_value_fn_or_params_are_named_errors():
  tx = optim.track_batch_sharpness()
  w = jnp.ones(3)
  with pytest.raises(ValueError, match="needs the extra argument value_fn"):
    tx.update(w, tx.init(w), w)
  with pytest.raises(ValueError, match="needs params"):
    tx.update(w, tx.init(w), value_fn=_loss)


def test_init_on_abstract_params_and_state_dtype_is_stable():
  tx = optim.track_batch_sharpness()
  abstract = jax.ShapeDtypeStruct((3,), jnp.float32)
  state = jax.eval_shape(tx.init, abstract)
  assert state.batch_sharpness.dtype == jnp.float32
  w = jnp.ones(3)
  batch = _batches(num_steps=1)[0]
  _, new_state = tx.update(w, tx.init(w), w, value_fn=_loss, batch=batch)
  assert jax.tree.map(lambda x: (x.shape, x.dtype), new_state) == jax.tree.map(
      lambda x: (x.shape, x.dtype), state)
