"""The carry-chain E-step against brute-force enumeration, and at N = 100."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import nesy


def _logp(num_digits, seed, scale=2.0, dtype=np.float64):
  rng = np.random.default_rng(seed)
  logits = scale * rng.normal(size=(2 * num_digits, 10))
  return (logits - np.log(np.exp(logits).sum(-1, keepdims=True))).astype(dtype)


def _brute_force(logp, num_digits):
  """Z_y and q_k(v | y) for every sum y, from all 100^N worlds (numpy, float64)."""
  k = 2 * num_digits
  worlds = np.stack(np.unravel_index(np.arange(10**k), (10,) * k), 1)
  log_p_w = logp[np.arange(k), worlds].sum(1)
  p_w = np.exp(log_p_w)
  place = 10 ** np.arange(num_digits)
  sums = worlds[:, :num_digits] @ place + worlds[:, num_digits:] @ place
  num_labels = 2 * (10**num_digits - 1) + 1
  z = np.bincount(sums, p_w, num_labels)
  q = np.stack([np.bincount(sums * 10 + worlds[:, j], p_w, num_labels * 10)
                .reshape(num_labels, 10) for j in range(k)], 1)
  best = np.full(num_labels, -np.inf)
  np.maximum.at(best, sums, log_p_w)
  return z, q / z[:, None, None], best


def _all_labels(num_digits):
  """Every label of N + 1 digits with top digit 0 or 1, feasible or not."""
  top = 2 * 10**num_digits
  return np.stack([[(y // 10**i) % 10 for i in range(num_digits + 1)]
                   for y in range(top)]).astype(np.int32)


@pytest.fixture(autouse=True)
def _x64():
  with jax.enable_x64(True):
    yield


@pytest.mark.parametrize("num_digits", [1, 2, 3])
def test_marginals_and_log_z_match_enumeration_for_every_label(num_digits):
  logp = _logp(num_digits, seed=num_digits)
  z_ref, q_ref, _ = _brute_force(logp, num_digits)
  program = nesy.DigitAddition(num_digits)
  labels = _all_labels(num_digits)
  feasible = jax.jit(jax.vmap(program.feasible))(jnp.asarray(labels))
  num_feasible = len(z_ref)
  np.testing.assert_array_equal(np.asarray(feasible),
                                np.arange(len(labels)) < num_feasible)
  q, log_z = jax.jit(jax.vmap(program.marginals, (None, 0)))(
      jnp.asarray(logp), jnp.asarray(labels[:num_feasible]))
  np.testing.assert_allclose(np.exp(log_z), z_ref, rtol=1e-10)
  np.testing.assert_allclose(q, q_ref, atol=1e-10)
  # The forward pass alone gives the same log Z.
  np.testing.assert_allclose(
      jax.jit(jax.vmap(program.log_z, (None, 0)))(jnp.asarray(logp),
                                          jnp.asarray(labels[:num_feasible])),
      log_z, rtol=1e-12)


@pytest.mark.parametrize("num_digits", [1, 2, 3])
def test_viterbi_is_the_brute_force_argmax(num_digits):
  logp = _logp(num_digits, seed=10 + num_digits)
  _, _, best_ref = _brute_force(logp, num_digits)
  program = nesy.DigitAddition(num_digits)
  labels = jnp.asarray(_all_labels(num_digits)[:len(best_ref)])
  z, best = jax.jit(jax.vmap(program.map_assignment, (None, 0)))(
      jnp.asarray(logp), labels)
  np.testing.assert_allclose(best, best_ref, rtol=1e-12)
  # The returned digits are a world of that probability with the right sum
  # (ties between worlds are measure zero for these random logits).
  assert bool(jnp.all(jax.jit(jax.vmap(program.satisfied))(z, labels)))
  np.testing.assert_allclose(
      logp[np.arange(2 * num_digits), np.asarray(z)].sum(1), best_ref,
      rtol=1e-12)


def _chi_square_exceeds_0_1_percent(counts, expected):
  """True if Pearson's statistic exceeds the 99.9% chi-square quantile.

  The quantile is Wilson and Hilferty's cube-root approximation (z = 3.09),
  within 1% of the exact one for these degrees of freedom.
  """
  statistic = np.sum((counts - expected) ** 2 / expected)
  df = len(counts) - 1
  quantile = df * (1 - 2 / (9 * df) + 3.09 * np.sqrt(2 / (9 * df))) ** 3
  return statistic > quantile


def test_ffbs_samples_follow_the_exact_marginals():
  """Chi-square of each digit's sample frequencies against q, fixed seed."""
  num_digits, num_draws = 3, 20000
  program = nesy.DigitAddition(num_digits)
  logp = jnp.asarray(_logp(num_digits, seed=3, scale=1.0))
  label = jnp.asarray(nesy.sum_to_digits(1077, num_digits))
  q, _ = program.marginals(logp, label)
  keys = jax.random.split(jax.random.key(0), num_draws)
  z = jax.jit(jax.vmap(program.sample, (0, None, None)))(keys, logp, label)
  assert bool(jnp.all(jax.jit(jax.vmap(program.satisfied, (0, None)))(z,
                                                                      label)))
  counts = np.stack([np.bincount(np.asarray(z[:, k]), minlength=10)
                     for k in range(2 * num_digits)])
  expected = num_draws * np.asarray(q)
  for k in range(2 * num_digits):
    support = expected[k] > 0
    assert counts[k][~support].sum() == 0
    assert not _chi_square_exceeds_0_1_percent(counts[k][support],
                                               expected[k][support]), (
                                                   k, counts[k], expected[k])


def test_ffbs_samples_follow_the_exact_joint_posterior():
  """Chi-square of the frequencies of whole worlds (N = 2) against brute force."""
  num_digits, num_draws, total = 2, 20000, 107
  program = nesy.DigitAddition(num_digits)
  logp = _logp(num_digits, seed=5, scale=0.7)
  worlds = np.stack(np.unravel_index(np.arange(10**4), (10,) * 4), 1)
  place = 10 ** np.arange(num_digits)
  consistent = worlds[(worlds[:, :2] @ place + worlds[:, 2:] @ place) == total]
  posterior = np.exp(logp[np.arange(4), consistent].sum(1))
  posterior /= posterior.sum()
  keys = jax.random.split(jax.random.key(1), num_draws)
  z = np.asarray(jax.jit(jax.vmap(program.sample, (0, None, None)))(
      keys, jnp.asarray(logp), jnp.asarray(nesy.sum_to_digits(total, 2))))
  index = {tuple(w): i for i, w in enumerate(consistent)}
  counts = np.bincount([index[tuple(w)] for w in z], minlength=len(consistent))
  assert not _chi_square_exceeds_0_1_percent(counts, num_draws * posterior)
  # The test has power: the same probabilities on the wrong worlds fail it.
  assert _chi_square_exceeds_0_1_percent(counts,
                                         num_draws * np.roll(posterior, 1))


def _rescaled_float64(logp, label):
  """log Z and marginals of the chain in probability space, normalised per step."""
  n = logp.shape[0] // 2
  p = np.exp(logp)
  a, b = np.arange(10)[:, None], np.arange(10)[None, :]
  t = np.zeros((n, 2, 2))
  pair = np.zeros((n, 2, 2, 10, 10))
  for i in range(n):
    joint = p[i][:, None] * p[n + i][None, :]
    for c in range(2):
      total = a + b + c
      for c_out in range(2):
        mask = (total % 10 == label[i]) & (total // 10 == c_out)
        pair[i, c, c_out] = joint * mask
        t[i, c, c_out] = pair[i, c, c_out].sum()
  alpha, log_scale = np.zeros((n + 1, 2)), 0.0
  alpha[0] = [1.0, 0.0]
  for i in range(n):
    alpha[i + 1] = alpha[i] @ t[i]
    scale = alpha[i + 1].sum()
    alpha[i + 1] /= scale
    log_scale += np.log(scale)
  beta = np.zeros((n + 1, 2))
  beta[n] = np.eye(2)[label[-1]]
  for i in range(n, 0, -1):
    beta[i - 1] = t[i - 1] @ beta[i]
    beta[i - 1] /= beta[i - 1].sum()
  q = np.zeros((2 * n, 10))
  for i in range(n):
    w = np.einsum("c,d,cdab->ab", alpha[i], beta[i + 1], pair[i])
    q[i], q[n + i] = w.sum(1) / w.sum(), w.sum(0) / w.sum()
  return log_scale + np.log(alpha[n][label[-1]]), q


_marginals_100 = jax.jit(nesy.DigitAddition(100).marginals)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_log_space_is_stable_at_100_digits(dtype):
  num_digits = 100
  rng = np.random.default_rng(7)
  digits = rng.integers(0, 10, 2 * num_digits)
  # Confident, mostly correct logits: log Z of the true sum is small but far
  # below float32's smallest normal (about e^-87) in probability space.
  logits = 3.0 * rng.normal(size=(2 * num_digits, 10))
  logits[np.arange(2 * num_digits), digits] += 4.0
  logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  total = (nesy.digits_to_int(digits[:num_digits])
           + nesy.digits_to_int(digits[num_digits:]))
  label = nesy.sum_to_digits(total, num_digits)
  log_z_ref, q_ref = _rescaled_float64(logp, label)
  assert log_z_ref < -87.0
  program = nesy.DigitAddition(num_digits)
  q, log_z = _marginals_100(jnp.asarray(logp, dtype), jnp.asarray(label))
  assert bool(jnp.isfinite(log_z)) and bool(jnp.all(jnp.isfinite(q)))
  tol = 1e-4 if dtype == jnp.float32 else 1e-10
  np.testing.assert_allclose(float(log_z), log_z_ref, rtol=tol)
  np.testing.assert_allclose(np.asarray(q, np.float64), q_ref, atol=tol * 10)
  grad = jax.jit(jax.grad(program.log_z))(jnp.asarray(logp, dtype),
                                          jnp.asarray(label))
  assert bool(jnp.all(jnp.isfinite(grad)))


def test_float32_marginals_at_the_experiments_size_are_distributions():
  """N = 100 and logits of scale 20, as em_nesy trains: |log Z| ~ 1,700.

  Normalised by the global log Z, float32 rows summed to 1 +- 6e-4 and q
  reached 1.0006.
  """
  num_digits = 100
  rng = np.random.default_rng(1)
  for _ in range(2):
    logits = jnp.asarray(20.0 * rng.normal(size=(2 * num_digits, 10)),
                         jnp.float32)
    logp = jax.nn.log_softmax(logits)  # float32, as the E-step has it
    digits = rng.integers(0, 10, 2 * num_digits)
    label = nesy.sum_to_digits(nesy.digits_to_int(digits[:num_digits])
                               + nesy.digits_to_int(digits[num_digits:]),
                               num_digits)
    log_z_ref, q_ref = _rescaled_float64(np.asarray(logp, np.float64), label)
    assert log_z_ref < -1000.0
    q, log_z = _marginals_100(logp, jnp.asarray(label))
    q = np.asarray(q, np.float64)
    assert q.max() <= 1.0
    np.testing.assert_allclose(q.sum(-1), 1.0,
                               atol=16 * np.finfo(np.float32).eps)
    np.testing.assert_allclose(q, q_ref, atol=1e-5)
    np.testing.assert_allclose(float(log_z), log_z_ref, rtol=1e-6)


def test_sum_to_digits_round_trips_and_rejects_unreachable_sums():
  big = 10**100 + 12345
  assert nesy.digits_to_int(nesy.sum_to_digits(big, 100)) == big
  assert nesy.sum_to_digits([0, 18], 1).tolist() == [[0, 0], [8, 1]]
  with pytest.raises(nesy.UnreachableSumError, match="19"):
    nesy.sum_to_digits(19, 1)
  with pytest.raises(ValueError):
    nesy.sum_to_digits(-1, 2)


def test_addition_examples_labels_are_the_sums():
  digit_labels = np.arange(50) % 10
  indices, labels = nesy.addition_examples(digit_labels, 200, 3, seed=0)
  assert indices.shape == (200, 6) and labels.shape == (200, 4)
  for row, label in zip(indices, labels):
    d = digit_labels[row]
    total = nesy.digits_to_int(d[:3]) + nesy.digits_to_int(d[3:])
    assert nesy.digits_to_int(label) == total


@pytest.mark.parametrize("bad", [0, -2, 1.5])
def test_num_digits_is_validated(bad):
  with pytest.raises(ValueError, match="num_digits"):
    nesy.DigitAddition(bad)


def test_wrong_shapes_name_the_argument():
  program = nesy.DigitAddition(2)
  with pytest.raises(ValueError, match="label"):
    program.marginals(jnp.zeros((4, 10)), jnp.zeros((2,), jnp.int32))
  with pytest.raises(ValueError, match="logp"):
    program.marginals(jnp.zeros((3, 10)), jnp.zeros((3,), jnp.int32))
  with pytest.raises(ValueError, match="label"):
    program.feasible(jnp.zeros((3,)))


@functools.partial(jax.jit, static_argnums=0)
def _batched_marginals(program, logp, labels):
  return jax.vmap(program.marginals)(logp, labels)


def test_batched_under_jit_matches_one_by_one():
  program = nesy.DigitAddition(4)
  logp = jnp.stack([jnp.asarray(_logp(4, s)) for s in range(3)])
  labels = jnp.asarray(nesy.sum_to_digits([123, 9999, 19998], 4))
  q, log_z = _batched_marginals(program, logp, labels)
  one = jax.jit(program.marginals)
  for i in range(3):
    q_i, log_z_i = one(logp[i], labels[i])
    np.testing.assert_allclose(q[i], q_i, rtol=1e-12)
    np.testing.assert_allclose(log_z[i], log_z_i, rtol=1e-12)
