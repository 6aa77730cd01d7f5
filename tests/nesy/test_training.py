"""EM-NeSy training: the step of each method, the epoch, the accuracies, the step costs."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxpapers import models
from jaxpapers import nesy

_OPT = optax.sgd(0.1)
_SIZES = (6, 8, 10)


def _batch(num_digits=1, batch=6, seed=0):
  rng = np.random.default_rng(seed)
  digits = rng.integers(0, 10, 12).astype(np.int32)
  images = rng.normal(size=(12, 6)).astype(np.float32)
  problems, labels = nesy.addition_examples(digits, batch, num_digits,
                                            seed=seed)
  return images, digits, jnp.asarray(problems), jnp.asarray(labels)


def test_one_exact_em_step_is_a_semantic_loss_step():
  """Fisher's identity: with one M-step the two methods move the MLP alike."""
  images, _, problems, labels = _batch()
  state = nesy.init_state(jax.random.key(0), _OPT, _SIZES)
  x = jnp.asarray(images)[problems]
  out = {m: jax.jit(nesy.make_train_step(m, nesy.DigitAddition(1), _OPT))(
      state, jax.random.key(1), x, labels) for m in ("em_exact", "semantic")}
  for a, b in zip(jax.tree.leaves(out["em_exact"][0].params),
                  jax.tree.leaves(out["semantic"][0].params)):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(out["em_exact"][1][1], out["semantic"][1][1],
                             rtol=1e-5)  # the same log Z per example


@pytest.mark.slow  # a training loop: compile-bound
def test_epoch_is_the_steps_over_its_permuted_batches():
  images, _, problems, labels = _batch(batch=9)
  step = nesy.make_train_step("em_hard", nesy.DigitAddition(1), _OPT,
                              m_steps=2)
  state = nesy.init_state(jax.random.key(0), _OPT, _SIZES)
  key = jax.random.key(3)
  new, stats = jax.jit(lambda s, *d: nesy.train_epoch(
      step, s, key, *d, batch_size=4))(state, images, problems, labels)
  order = np.asarray(jax.random.permutation(key, 9))[:8].reshape(2, 4)
  keys = jax.random.split(jax.random.fold_in(key, 1), 2)
  losses, log_z = [], []
  for k, index in zip(keys, order):  # the 9th sum fills no batch
    state, (loss, z, _) = step(state, k, jnp.asarray(images)[problems[index]],
                               labels[index])
    losses.append(loss)
    log_z.append(z)
  for a, b in zip(jax.tree.leaves(new), jax.tree.leaves(state)):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(stats["train_loss"], np.mean(losses), rtol=1e-5)
  np.testing.assert_allclose(stats["train_log_z"], np.mean(log_z), rtol=1e-5)
  assert stats["train_weight"] == 1.0


def test_accuracy_counts_argmax_digits_and_sums():
  images, digits, problems, labels = _batch(num_digits=2, batch=5)
  params = nesy.init_state(jax.random.key(0), _OPT, _SIZES).params
  acc = nesy.addition_accuracy(nesy.DigitAddition(2), params,
                               jnp.asarray(images), problems, labels,
                               jnp.asarray(digits))
  predicted = np.argmax(models.apply_mlp(params, jnp.asarray(images)), -1)
  sums = [nesy.digits_to_int(list(p[:2])) + nesy.digits_to_int(list(p[2:]))
          for p in predicted[np.asarray(problems)]]
  truth = [nesy.digits_to_int(list(label)) for label in np.asarray(labels)]
  assert acc["sum_accuracy"] == pytest.approx(np.mean(np.equal(sums, truth)))
  assert acc["digit_accuracy"] == pytest.approx(np.mean(predicted == digits))


def test_reinforce_step_reports_its_reward_as_the_weight():
  images, _, problems, labels = _batch()
  state = nesy.init_state(jax.random.key(0), _OPT, _SIZES)
  step = nesy.make_train_step("reinforce", nesy.DigitAddition(1), _OPT,
                              reinforce_samples=4)
  _, (loss, log_z, weight) = step(state, jax.random.key(1),
                                  jnp.asarray(images)[problems], labels)
  assert loss.shape == () and log_z.tolist() == [-np.inf]
  assert weight.shape == (1,) and 0.0 <= float(weight[0]) <= 1.0


def test_addition_batch_gathers_the_problems_images():
  images = np.arange(40, dtype=np.float32).reshape(10, 4)
  x, labels = nesy.addition_batch(images, np.arange(10), 3, 2, seed=5)
  problems, expected = nesy.addition_examples(np.arange(10), 3, 2, seed=5)
  np.testing.assert_array_equal(x, images[problems])
  np.testing.assert_array_equal(labels, expected)


@pytest.mark.slow  # a training loop: compile-bound
def test_step_costs_pairs_every_step_it_times():
  images, digits, _, _ = _batch()
  costs = nesy.step_costs(images, digits, num_digits=(1, 2),
                          enumerated=(1,), optimizer=_OPT,
                          layer_sizes=_SIZES, batch_size=2, rounds=2,
                          repeats=1)
  assert set(costs["chain"]) == {"1", "2"}
  assert costs["chain"]["1"]["rounds"] == 2
  assert costs["chain"]["1"]["em_exact_peak_bytes"] > 0
  assert costs["enumeration"]["1"]["num_worlds"] == 100
  # No enumeration at N = 2: no enumeration_2_over_1.
  assert set(costs["paired"]) == {"em_per_digit", "em_exact_2_over_1"}
  assert costs["paired"]["em_per_digit"]["n"] == [1, 2]
