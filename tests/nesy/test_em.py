"""EM-NeSy: the gradient identity, the approximate E-steps, infeasible labels, REINFORCE."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import nesy
from jaxpapers.models import mlp


def _problem(num_digits, batch, dtype, seed=0):
  """An MLP over random 'images' and labels, some of them infeasible."""
  rng = np.random.default_rng(seed)
  params = mlp.init_mlp(jax.random.key(seed), (8, 16, 10), dtype=dtype)
  x = jnp.asarray(rng.normal(size=(batch, 2 * num_digits, 8)), dtype)
  totals = rng.integers(0, 2 * (10**num_digits - 1) + 1, batch)
  labels = np.stack([nesy.sum_to_digits(int(t), num_digits) for t in totals])
  labels[0] = 9  # 99..9 with top digit 9: no digits give it
  labels[1, -1], labels[1, :-1] = 1, 9  # 199..9 > 2 (10^N - 1)
  return params, x, jnp.asarray(labels)


def _identity_gradients(num_digits, dtype):
  program = nesy.DigitAddition(num_digits)
  params, x, labels = _problem(num_digits, 6, dtype)
  step = nesy.estep(program)

  def neg_em_loss(p):
    return -nesy.em_step(step, jax.random.key(0), mlp.apply_mlp(p, x),
                         labels)[0]

  def mean_log_z(p):  # the semantic loss with its sign flipped
    return -nesy.semantic_loss(program, mlp.apply_mlp(p, x), labels)

  return jax.jit(jax.grad(mean_log_z))(params), jax.jit(jax.grad(neg_em_loss))(
      params)


@pytest.mark.parametrize("num_digits", [2, 15])
def test_grad_log_z_is_minus_grad_em_loss_float32(num_digits):
  grad_log_z, grad_em = _identity_gradients(num_digits, jnp.float32)
  for a, b in zip(jax.tree.leaves(grad_log_z), jax.tree.leaves(grad_em)):
    assert bool(jnp.all(jnp.isfinite(a)))
    np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("num_digits", [3])
def test_grad_log_z_is_minus_grad_em_loss_x64(num_digits):
  with jax.enable_x64(True):
    grad_log_z, grad_em = _identity_gradients(num_digits, jnp.float64)
    for a, b in zip(jax.tree.leaves(grad_log_z), jax.tree.leaves(grad_em)):
      assert a.dtype == jnp.float64
      np.testing.assert_allclose(a, b, atol=1e-10, rtol=1e-10)


def test_infeasible_labels_weigh_zero_and_add_nothing():
  program = nesy.DigitAddition(2)
  params, x, labels = _problem(2, 6, jnp.float32)
  logits = mlp.apply_mlp(params, x)
  post = jax.jit(nesy.estep(program))(jax.random.key(0), logits, labels)
  assert post.weight.tolist() == [0.0, 0.0, 1.0, 1.0, 1.0, 1.0]
  assert bool(jnp.all(post.marginals[:2] == 0.0))
  assert bool(jnp.all(jnp.isneginf(post.log_z[:2])))
  np.testing.assert_allclose(jnp.sum(post.marginals[2:], -1), 1.0, rtol=1e-5)
  # The loss over all 6 is 4/6 of the loss over the 4 feasible examples.
  for loss in (lambda l, y: nesy.semantic_loss(program, l, y),
               lambda l, y: nesy.em_step(nesy.estep(program), None, l, y)[0]):
    loss = jax.jit(loss)
    np.testing.assert_allclose(loss(logits, labels),
                               loss(logits[2:], labels[2:]) * 4 / 6, rtol=1e-6)


@pytest.mark.parametrize("inference", ["exact", "hard", "stochastic",
                                       "rejection"])
def test_every_estep_gives_distributions_over_consistent_worlds(inference):
  program = nesy.DigitAddition(2)
  _, _, labels = _problem(2, 6, jnp.float32)
  # Confident logits, so that rejection accepts samples for most labels.
  logits = 8.0 * jax.nn.one_hot(jax.random.randint(jax.random.key(1), (6, 4),
                                                   0, 10), 10)
  step = jax.jit(nesy.estep(program, inference, num_samples=64))
  post = step(jax.random.key(2), logits, labels)
  assert post.marginals.shape == (6, 4, 10)
  sums = jnp.sum(post.marginals, -1)
  np.testing.assert_allclose(sums, post.weight[:, None] * jnp.ones((6, 4)),
                             rtol=1e-5)
  assert post.weight[:2].tolist() == [0.0, 0.0]
  if inference in ("hard", "stochastic"):
    z = jnp.argmax(post.marginals, -1)
    assert bool(jnp.all(jnp.max(post.marginals[2:], -1) == 1.0))
    assert bool(jnp.all(jax.vmap(program.satisfied)(z[2:], labels[2:])))
  if inference == "hard":
    z_map, log_p = jax.vmap(program.map_assignment)(
        jax.nn.log_softmax(logits), labels)
    np.testing.assert_array_equal(z[2:], z_map[2:])
    np.testing.assert_allclose(post.log_z[2:], log_p[2:], rtol=1e-6)


def test_rejection_marginals_converge_to_the_exact_ones():
  program = nesy.DigitAddition(1)
  logits = jax.random.normal(jax.random.key(0), (1, 2, 10))
  label = jnp.asarray(nesy.sum_to_digits([9], 1))
  exact = jax.jit(nesy.estep(program))(None, logits, label)
  rejection = jax.jit(nesy.estep(program, "rejection", num_samples=200000))(
      jax.random.key(3), logits, label)
  # Acceptance ~ p(y|x): its log estimates log Z.
  np.testing.assert_allclose(rejection.log_z, exact.log_z, atol=0.05)
  np.testing.assert_allclose(rejection.marginals, exact.marginals, atol=0.01)


def test_rejection_gives_zero_weight_when_nothing_is_accepted():
  program = nesy.DigitAddition(15)
  params, x, labels = _problem(15, 4, jnp.float32)
  logits = mlp.apply_mlp(params, x)
  step = nesy.estep(program, "rejection", num_samples=256)
  (value, post), grad = jax.jit(jax.value_and_grad(
      lambda l: nesy.em_step(step, jax.random.key(0), l, labels),
      has_aux=True))(logits)
  # p(y|x) ~ 1e-15 at random logits: no sample of 256 is accepted.
  assert post.weight.tolist() == [0.0] * 4
  assert float(value) == 0.0 and bool(jnp.all(grad == 0.0))


def test_reinforce_gradient_is_unbiased_for_minus_grad_p():
  program = nesy.DigitAddition(1)
  logits = jax.random.normal(jax.random.key(0), (1, 2, 10))
  labels = jnp.asarray(nesy.sum_to_digits([7], 1))
  exact = jax.jit(jax.grad(
      lambda l: -jnp.exp(nesy.log_z(program, l, labels))[0]))(logits)

  def estimate(key):
    return jax.grad(lambda l: nesy.reinforce_loss(program, key, l, labels)[0])(
        logits)

  estimates = jax.jit(jax.vmap(estimate))(jax.random.split(jax.random.key(1),
                                                           4000))
  mean, se = jnp.mean(estimates, 0), jnp.std(estimates, 0) / np.sqrt(4000)
  # Within 4.5 standard errors everywhere (60 entries; fixed seed).
  assert bool(jnp.all(jnp.abs(mean - exact) <= 4.5 * se + 1e-6))
  assert float(jnp.max(jnp.abs(exact))) > 10 * float(jnp.max(se))


def test_reinforce_reward_is_zero_for_infeasible_labels():
  program = nesy.DigitAddition(1)
  loss, reward = jax.jit(nesy.reinforce_loss, static_argnums=0)(
      program, jax.random.key(0), jnp.zeros((2, 2, 10)),
      jnp.asarray([[9, 1], [0, 2]]))
  assert float(reward) == 0.0 and float(loss) == 0.0


def test_enumerated_addition_matches_the_carry_chain():
  for num_digits in (2,):
    chain = nesy.DigitAddition(num_digits)
    table = nesy.addition_program(num_digits)
    logits = jax.random.normal(jax.random.key(num_digits),
                               (5, 2 * num_digits, 10))
    totals = [0, 7, 10**num_digits, 2 * (10**num_digits - 1), 11]
    digits = jnp.asarray(nesy.sum_to_digits(totals, num_digits))
    for inference in ("exact", "hard"):
      a = jax.jit(nesy.estep(chain, inference))(None, logits, digits)
      b = jax.jit(nesy.estep(table, inference))(None, logits,
                                                jnp.asarray(totals))
      np.testing.assert_allclose(a.marginals, b.marginals, atol=1e-5)
      np.testing.assert_allclose(a.log_z, b.log_z, rtol=1e-5)
    semantic = jax.jit(nesy.semantic_loss, static_argnums=0)
    np.testing.assert_allclose(semantic(chain, logits, digits),
                               semantic(table, logits, jnp.asarray(totals)),
                               rtol=1e-5)


def test_a_user_program_by_enumeration_matches_numpy():
  """Three symbols of 4 values, label = (z0 * z1 + z2) mod 5; all labels."""
  phi = lambda z: (z[0] * z[1] + z[2]) % 5
  program = nesy.enumerate_program(phi, 3, 4)
  logits = np.asarray(jax.random.normal(jax.random.key(0), (3, 4)), np.float64)
  logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  labels = jnp.arange(6, dtype=jnp.int32)  # label 5 is infeasible
  sample = jax.jit(jax.vmap(program.sample, (0, None, None)))
  satisfied = jax.jit(jax.vmap(program.satisfied, (0, None)))
  post = jax.jit(nesy.estep(program))(None, jnp.broadcast_to(
      jnp.asarray(logp, jnp.float32), (6, 3, 4)), labels)
  for y in range(6):
    worlds = [w for w in np.ndindex(4, 4, 4) if phi(w) == y]
    p_w = np.array([np.exp(sum(logp[k, w[k]] for k in range(3)))
                    for w in worlds])
    if not worlds:
      assert float(post.weight[y]) == 0.0
      continue
    np.testing.assert_allclose(float(post.log_z[y]), np.log(p_w.sum()),
                               rtol=1e-5)
    q = np.zeros((3, 4))
    for w, p in zip(worlds, p_w):
      q[np.arange(3), w] += p / p_w.sum()
    np.testing.assert_allclose(post.marginals[y], q, atol=1e-6)
    samples = sample(jax.random.split(jax.random.key(y), 50),
                     jnp.asarray(logp, jnp.float32), labels[y])
    assert bool(jnp.all(satisfied(samples, labels[y])))


def test_enumeration_refuses_large_symbol_spaces():
  with pytest.raises(ValueError, match="max_worlds"):
    nesy.addition_program(4)
  with pytest.raises(ValueError, match="one int label"):
    nesy.enumerate_program(lambda z: 0.5, 2, 2)


def test_bad_arguments_are_named():
  program = nesy.DigitAddition(2)
  with pytest.raises(ValueError, match="inference"):
    nesy.estep(program, "gibbs")
  with pytest.raises(ValueError, match="num_samples"):
    nesy.estep(program, "rejection", num_samples=0)
  with pytest.raises(ValueError, match="num_samples"):
    nesy.reinforce_loss(program, jax.random.key(0), jnp.zeros((1, 4, 10)),
                        jnp.zeros((1, 3), jnp.int32), num_samples=1)
  step = nesy.estep(program)
  with pytest.raises(ValueError, match="logits"):
    step(None, jnp.zeros((2, 3, 10)), jnp.zeros((2, 3), jnp.int32))
  with pytest.raises(ValueError, match="labels"):
    step(None, jnp.zeros((2, 4, 10)), jnp.zeros((2, 2), jnp.int32))
  with pytest.raises(TypeError, match="labels"):
    step(None, jnp.zeros((2, 4, 10)), jnp.zeros((2, 3)))
  with pytest.raises(ValueError, match="marginals"):
    nesy.em_loss(jnp.zeros((2, 4, 10)),
                 nesy.Posterior(jnp.zeros((2, 4, 9)), jnp.zeros(2),
                                jnp.zeros(2)))
