"""jaxpapers.models._forecaster_training: vmapped groups train as runs trained alone would."""

import functools

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxpapers import data
from jaxpapers import losses
from jaxpapers import models

_TX = models.forecaster_optimizer(1e-2, weight_decay=1e-4, clip_norm=1.0)
_MAKE = functools.partial(models.make_forecaster, "mlp", 4, 2, hidden=(4, 4))
_rng = np.random.default_rng(0)
_WINDOWS = (jnp.asarray(_rng.normal(size=(6, 4, 2)), jnp.float32),
            jnp.asarray(_rng.normal(size=(6, 3, 2)), jnp.float32))


def test_members_of_one_seed_start_alike():
  group = models.ForecasterGroup("penalty", 0, (0.0, 0.0, 0.1, 0.1),
                                 (0, 1, 0, 1))
  _, state, data_keys = models.init_group(group, _MAKE, _TX)
  leaves = jax.tree.leaves(state.params)
  for leaf in leaves:
    np.testing.assert_array_equal(leaf[0], leaf[2])
  # Biases start at zero; the kernels differ between seeds.
  assert any(not np.array_equal(leaf[0], leaf[1]) for leaf in leaves)
  keys = jax.random.key_data(data_keys)
  np.testing.assert_array_equal(keys[0], keys[2])
  assert not np.array_equal(keys[0], keys[1])


# optax 0.2.8 mixes its int32 step count into Adam's float bias correction.
@pytest.mark.slow  # a training loop: compile-bound
@pytest.mark.usefixtures("standard_dtype_promotion")
def test_a_chunk_is_the_members_optax_loop_written_out():
  """Two steps of a two-member group == each member's plain optax loop."""
  group = models.ForecasterGroup("penalty", 0, (0.0, 0.5), (3, 3))
  graphdef, state, data_keys = models.init_group(group, _MAKE, _TX)
  chunk = models.make_train_chunk(group, graphdef, _TX, batch_size=4,
                                  num_steps=2)
  new, stats = chunk(state, jnp.asarray(group.lams, jnp.float32), data_keys,
                     _WINDOWS)
  assert int(new.step) == 2
  predict = lambda params, window: nnx.merge(graphdef, params)(window)
  for i, lam in enumerate(group.lams):
    params = jax.tree.map(lambda x: x[i], state.params)
    opt_state, losses_seen = _TX.init(params), []
    for step in range(2):
      batch = data.take(_WINDOWS, data.minibatch_indices(
          jax.random.fold_in(data_keys[i], step), 6, 4))
      (loss, _), grads = jax.value_and_grad(
          losses.teacher_forcing_loss, argnums=1, has_aux=True)(
              predict, params, batch[0], batch[1][:, :1], lam)
      updates, opt_state = _TX.update(grads, opt_state, params)
      params = optax.apply_updates(params, updates)
      losses_seen.append(loss)
    np.testing.assert_allclose(stats["loss"][i], np.mean(losses_seen),
                               rtol=1e-5)
    for got, want in zip(jax.tree.leaves(new.params),
                         jax.tree.leaves(params)):
      np.testing.assert_allclose(got[i], want, rtol=1e-4, atol=1e-6)
  # Same seed, same batches: TF and the penalty differ only by the penalty.
  assert stats["penalty"][1] > 0
  assert stats["task_loss"][0] != stats["task_loss"][1]


# optax 0.2.8 mixes its int32 step count into Adam's float bias correction.
@pytest.mark.usefixtures("standard_dtype_promotion")
def test_unrolled_groups_train_on_k_steps_and_evaluation_scores_each_member():
  group = models.ForecasterGroup("unroll", 3, (0.0, 0.0), (0, 1))
  graphdef, state, data_keys = models.init_group(group, _MAKE, _TX)
  chunk = models.make_train_chunk(group, graphdef, _TX, batch_size=6,
                                  num_steps=1)
  _, stats = chunk(state, jnp.zeros(2), data_keys, _WINDOWS)
  predict = lambda params, window: nnx.merge(graphdef, params)(window)
  scores = models.evaluate_members(graphdef, state.params, _WINDOWS, _WINDOWS,
                                   vpt_threshold=0.4)
  for i in range(2):
    params = jax.tree.map(lambda x: x[i], state.params)
    # batch_size = N: the whole set, so the loss is the unrolled loss.
    np.testing.assert_allclose(
        stats["loss"][i], losses.unrolled_loss(predict, params, *_WINDOWS),
        rtol=1e-5)
    errors = losses.free_running_errors(predict, params, *_WINDOWS,
                                        vpt_threshold=0.4)
    np.testing.assert_allclose(scores["test_mse"][i], errors.mse, rtol=1e-5)
    np.testing.assert_allclose(scores["val_mse"][i], errors.mse[-1], rtol=1e-5)
    np.testing.assert_allclose(scores["vpt"][i],
                               np.mean(np.asarray(errors.valid_steps)))
  assert stats["penalty"].tolist() == [0.0, 0.0]


def test_forecast_task_windows_follow_the_horizons():
  series = data.lorenz96(num_samples=300, num_dims=5)
  task = models.forecast_task(series, lookback=6, horizons=(1, 4, 9),
                              train_horizon=2, test_stride=3)
  assert (task.lookback, task.channels, task.horizons) == (6, 5, (1, 4, 9))
  assert task.train[1].shape[1:] == (2, 5)
  assert task.val[1].shape[1:] == (4, 5) and task.test[1].shape[1:] == (9, 5)
  assert "lookback 6" in task.provenance
