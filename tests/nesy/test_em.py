"""EM-NeSy: the gradient identity, the approximate E-steps, infeasible labels, REINFORCE."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import nesy
from jaxpapers.models import _mlp as mlp


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


_TWO_DIGITS = nesy.DigitAddition(2)


@jax.jit
def _exact_and_losses(logits, labels):
  """The exact E-step, both losses and their gradients: one compile, (6, 4, 10)."""
  (em, posterior), em_grad = jax.value_and_grad(
      lambda l: nesy.em_step(nesy.estep(_TWO_DIGITS), None, l, labels),
      has_aux=True)(logits)
  semantic, semantic_grad = jax.value_and_grad(
      lambda l: nesy.semantic_loss(_TWO_DIGITS, l, labels))(logits)
  return {"posterior": posterior, "em": em, "em_grad": em_grad,
          "semantic": semantic, "semantic_grad": semantic_grad}


def _em_loss_numpy(logits, marginals):
  """-1/B sum q log p with 0 log 0 = 0, in float64."""
  logits = np.asarray(logits, np.float64)
  logp = logits - logits.max(-1, keepdims=True)
  logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
  q = np.asarray(marginals, np.float64)
  return -np.sum(np.where(q > 0, q * np.where(q > 0, logp, 0.0), 0.0)) / len(q)


def test_infeasible_labels_weigh_zero_and_add_nothing():
  params, x, labels = _problem(2, 6, jnp.float32)
  logits = mlp.apply_mlp(params, x)
  out = _exact_and_losses(logits, labels)
  post = out["posterior"]
  assert post.weight.tolist() == [0.0, 0.0, 1.0, 1.0, 1.0, 1.0]
  assert bool(jnp.all(post.marginals[:2] == 0.0))
  assert bool(jnp.all(jnp.isneginf(post.log_z[:2])))
  np.testing.assert_allclose(jnp.sum(post.marginals[2:], -1), 1.0, rtol=1e-5)
  # Both losses are means over all 6 to which the 2 infeasible add 0.
  np.testing.assert_allclose(out["semantic"], -jnp.sum(post.log_z[2:]) / 6,
                             rtol=1e-6)
  np.testing.assert_allclose(out["em"], _em_loss_numpy(logits, post.marginals),
                             rtol=1e-5)
  assert bool(jnp.all(out["semantic_grad"][:2] == 0.0))
  np.testing.assert_allclose(out["em_grad"], out["semantic_grad"], atol=1e-6)


def _special_rows(logits, labels):
  """Three rows appended to a (B, 4, 10) two-digit batch: dropped, NaN, NaN.

  Zero-probability evidence (198 = 99 + 99 only, and a_1 = 9 has
  probability 0), a NaN logit, and a label digit 12 (traced here).
  """
  extra = jnp.zeros((3, 4, 10), logits.dtype).at[0, 0, 9].set(-jnp.inf)
  extra = extra.at[1, 2, 5].set(jnp.nan)
  extra_labels = jnp.array([[8, 9, 1], [3, 0, 0], [12, 0, 0]], labels.dtype)
  return (jnp.concatenate([logits, extra]),
          jnp.concatenate([labels, extra_labels]))


def _assert_special_rows(post, first):
  """Row ``first`` dropped (weight 0, log Z -inf, zero q); the next two all NaN."""
  assert float(post.weight[first]) == 0.0
  assert bool(jnp.isneginf(post.log_z[first]))
  assert bool(jnp.all(post.marginals[first] == 0.0))
  for value in post:
    assert bool(jnp.all(jnp.isnan(value[first + 1:first + 3])))


_satisfied = jax.jit(jax.vmap(_TWO_DIGITS.satisfied))  # on (4, 4) digits


@pytest.mark.parametrize("inference", ["hard", "stochastic", "rejection"])
def test_every_estep_gives_distributions_over_consistent_worlds(inference):
  """Also every engine's verdict on the special rows: one verdict for all.

  "exact" is checked on the same rows by the tests of _exact_and_losses and
  against brute force below.
  """
  program = nesy.DigitAddition(2)
  _, _, labels = _problem(2, 6, jnp.float32)
  # Confident logits, so that rejection accepts samples for most labels.
  logits = 8.0 * jax.nn.one_hot(jax.random.randint(jax.random.key(1), (6, 4),
                                                   0, 10), 10)
  logits, labels = _special_rows(logits, labels)
  step = jax.jit(nesy.estep(program, inference, num_samples=64))
  post = step(jax.random.key(2), logits, labels)
  assert post.marginals.shape == (9, 4, 10)
  _assert_special_rows(post, 6)
  post, labels = nesy.Posterior(*(value[:6] for value in post)), labels[:6]
  sums = jnp.sum(post.marginals, -1)
  np.testing.assert_allclose(sums, post.weight[:, None] * jnp.ones((6, 4)),
                             rtol=1e-5)
  assert post.weight[:2].tolist() == [0.0, 0.0]
  if inference in ("hard", "stochastic"):
    z = jnp.argmax(post.marginals, -1)
    assert bool(jnp.all(jnp.max(post.marginals[2:], -1) == 1.0))
    assert bool(jnp.all(_satisfied(z[2:], labels[2:])))
  if inference == "hard":
    z_map, log_p = jax.vmap(program.map_assignment)(
        jax.nn.log_softmax(logits[:6]), labels)
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


_reinforce = jax.jit(nesy.reinforce_loss, static_argnums=0)


def test_reinforce_reward_is_zero_for_infeasible_labels():
  program = nesy.DigitAddition(1)
  loss, reward = _reinforce(program, jax.random.key(0), jnp.zeros((2, 2, 10)),
                            jnp.asarray([[9, 1], [0, 2]]))
  assert float(reward) == 0.0 and float(loss) == 0.0
  # Zero-probability evidence (18 with a_1 = 9 impossible) is dropped too.
  loss, reward = _reinforce(program, jax.random.key(0),
                            jnp.zeros((2, 2, 10)).at[:, 0, 9].set(-jnp.inf),
                            jnp.asarray([[8, 1], [8, 1]]))
  assert float(reward) == 0.0 and float(loss) == 0.0


def test_reinforce_is_nan_for_a_nan_logit_or_a_traced_bad_label():
  """Never a reward of 0 (a silently smaller loss) for either."""
  program = nesy.DigitAddition(1)
  logits = jnp.zeros((2, 2, 10))
  labels = jnp.asarray([[3, 0], [4, 0]])
  loss, reward = _reinforce(program, jax.random.key(0), logits, labels)
  assert bool(jnp.isfinite(loss)) and 0.0 < float(reward) < 1.0
  for bad_logits, bad_labels in ((logits.at[1, 0, 0].set(jnp.nan), labels),
                                 (logits, labels.at[1, 0].set(12))):
    loss, reward = _reinforce(program, jax.random.key(0), bad_logits,
                              bad_labels)
    assert bool(jnp.isnan(loss)) and bool(jnp.isnan(reward))


_TWO_DIGIT_TABLE = nesy.addition_program(2)
_SCALES = (1.0, 20.0, 1e4, 1e30)
_PER_SCALE = 8
_EPS32 = float(np.finfo(np.float32).eps)


@functools.partial(jax.jit, static_argnums=(0, 1))
def _estep(program, inference, logits, labels):
  return nesy.estep(program, inference)(None, logits, labels)


# Rows of each scale's block of 8 in _scale_problem.
_TIED_BEST, _TIED_RANDOM, _NORMAL = np.r_[0:3], np.r_[3:6], np.r_[6:8]


def _scale_problem():
  """(34, 4, 10) float32 logits and sums: 8 per logit scale, then 2 special rows.

  Per scale: 3 examples with tied logits (scale times 0/1) labelled by the
  sum of one of their most probable worlds, so that q is uniform over the
  tied best worlds, exactly, at any scale; 3 with tied logits and random
  sums; 2 with scale times normal logits and random sums. Row 32 is
  zero-probability evidence (198 = 99 + 99 only, a_1 = 9 impossible), row
  33 has a NaN logit.
  """
  rng = np.random.default_rng(0)
  logits, totals = [], []
  for scale in _SCALES:
    for i in range(_PER_SCALE):
      if i in _NORMAL:
        logits.append(scale * rng.normal(size=(4, 10)))
        totals.append(rng.integers(0, 199))
        continue
      tied = rng.integers(0, 2, (4, 10))
      best = [rng.choice(np.flatnonzero(row == row.max())) for row in tied]
      logits.append(scale * tied)
      totals.append(best[0] + best[2] + 10 * (best[1] + best[3]) if i in
                    _TIED_BEST else rng.integers(0, 199))
  logits = np.concatenate([np.stack(logits), np.zeros((2, 4, 10))]).astype(
      np.float32)
  logits[32, 0, 9], logits[33, 1, 4] = -np.inf, np.nan
  totals = np.array(totals + [198, 0])
  totals[[3, 6, 7, 14, 15]] = [0, 7, 100, 198, 11]  # the extremes
  return logits, totals


def _brute_force_marginals(logits, totals, num_digits):
  """q_k(v | y) in float64 from the float32 logits, over all 100^N worlds."""
  k = 2 * num_digits
  worlds = np.stack(np.unravel_index(np.arange(10**k), (10,) * k), 1)
  place = 10 ** np.arange(num_digits)
  sums = worlds[:, :num_digits] @ place + worlds[:, num_digits:] @ place
  logits = np.asarray(logits, np.float64)
  logp = logits - logits.max(-1, keepdims=True)
  logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
  q = np.zeros(logits.shape)
  for b, total in enumerate(totals):
    w = worlds[sums == total]
    log_p_w = logp[b, np.arange(k), w].sum(1)
    p_w = np.exp(log_p_w - log_p_w.max())
    for j in range(k):
      np.add.at(q[b, j], w[:, j], p_w / p_w.sum())
  return q


def _scale_problem_labels(program, totals):
  if program is _TWO_DIGITS:
    return jnp.asarray(nesy.sum_to_digits(list(totals), 2))
  return jnp.asarray(totals, jnp.int32)


def test_enumerated_addition_matches_the_carry_chain():
  """Same marginals, log Z, MAP and verdicts from the table and the chain."""
  logits, totals = _scale_problem()
  logits = jnp.asarray(logits)
  # Exact where float32 pins q down (next test); MAP worlds where they are
  # unique (normal logits at scales 1 and 20).
  rows = {"exact": np.r_[0:22, 24:27, 30:34],
          "hard": np.r_[_NORMAL, _NORMAL + _PER_SCALE, 32:34]}
  for inference in ("exact", "hard"):
    a, b = (_estep(program, inference, logits,
                   _scale_problem_labels(program, totals))
            for program in (_TWO_DIGITS, _TWO_DIGIT_TABLE))
    for post in (a, b):
      assert float(post.weight[32]) == 0.0
      assert bool(jnp.all(jnp.isnan(post.marginals[33])))
    np.testing.assert_array_equal(a.weight, b.weight)
    np.testing.assert_allclose(a.marginals[rows[inference]],
                               b.marginals[rows[inference]], atol=1e-5)
    np.testing.assert_allclose(a.log_z[rows[inference]],
                               b.log_z[rows[inference]], rtol=1e-5)
  semantic = jax.jit(nesy.semantic_loss, static_argnums=0)
  np.testing.assert_allclose(
      *(semantic(program, logits[:8], _scale_problem_labels(program,
                                                            totals[:8]))
        for program in (_TWO_DIGITS, _TWO_DIGIT_TABLE)), rtol=1e-5)


def test_marginals_sum_to_one_and_match_brute_force_at_every_logit_scale():
  """Rows normalised on their own: float32 q at logit scales 1 .. 1e30.

  Normalised by the global log Z, rows summed to 1 +- 4e-4 at scale 1e4,
  and at 1e30 tied worlds each got q = 1 (a row summing to 2) or inf.
  """
  logits, totals = _scale_problem()
  reference = _brute_force_marginals(logits[:32], totals[:32], 2)
  for program in (_TWO_DIGITS, _TWO_DIGIT_TABLE):
    # The jitted E-step of the test above, on the same 34 rows.
    post = _estep(program, "exact", jnp.asarray(logits),
                  _scale_problem_labels(program, totals))
    q = np.asarray(post.marginals[:32], np.float64)
    assert bool(jnp.all(post.weight[:32] == 1.0))
    assert np.all(np.isfinite(q)) and q.max() <= 1.0
    np.testing.assert_allclose(q.sum(-1), 1.0, atol=16 * _EPS32)
    for i, scale in enumerate(_SCALES):
      block = i * _PER_SCALE
      error = np.abs(q[block:block + _PER_SCALE]
                     - reference[block:block + _PER_SCALE]).max((1, 2))
      # Ties at the best worlds are exact. Otherwise a logit of scale s
      # is itself rounded to about s * eps in float32, so q agrees to ~2K
      # that; at 1e30 that is no bound for tied non-best worlds (log 2 is
      # lost next to 1e30, in float64 too), and normal logits are one-hot.
      atol = np.full(_PER_SCALE, max(1e-6, 4 * 4 * scale * _EPS32))
      atol[_TIED_BEST] = 1e-6
      if scale == 1e30:
        atol[_TIED_RANDOM], atol[_NORMAL] = np.inf, 1e-6
      np.testing.assert_array_less(error, atol,
                                   err_msg=f"{program} at scale {scale}")


def test_zero_probability_evidence_gets_the_same_verdict_everywhere():
  """A -inf logit on every world of a feasible label: dropped by all, no NaN.

  The E-step used to give NaN marginals and a NaN EM loss where
  semantic_loss gave 0 for the same example.
  """
  logits = jnp.asarray(np.random.default_rng(1).normal(size=(6, 4, 10)),
                       jnp.float32)
  logits = logits.at[0, 0, 9].set(-jnp.inf)  # 198 = 99 + 99: impossible
  logits = logits.at[1, 0, 0].set(-jnp.inf)  # 9 + 0 = 9 loses one world
  labels = jnp.asarray(nesy.sum_to_digits([198, 9, 7, 150, 0, 33], 2))
  labels = labels.at[5].set(jnp.array([9, 9, 1]))  # 199: infeasible
  out = _exact_and_losses(logits, labels)
  post = out["posterior"]
  assert post.weight.tolist() == [0.0, 1.0, 1.0, 1.0, 1.0, 0.0]
  assert bool(jnp.all(jnp.isneginf(post.log_z[jnp.array([0, 5])])))
  assert bool(jnp.all(post.marginals[jnp.array([0, 5])] == 0.0))
  np.testing.assert_allclose(jnp.sum(post.marginals[1:5], -1), 1.0, atol=1e-6)
  assert float(post.marginals[1, 0, 0]) == 0.0  # q = 0 where p = 0
  np.testing.assert_allclose(out["semantic"], -jnp.sum(post.log_z[1:5]) / 6,
                             rtol=1e-6)
  # 0 log 0 = 0 in the EM loss (it was 0 * -inf = NaN), and its gradient
  # is the semantic loss's (Fisher's identity); dropped rows add nothing.
  np.testing.assert_allclose(out["em"], _em_loss_numpy(logits, post.marginals),
                             rtol=1e-5)
  np.testing.assert_allclose(out["em_grad"], out["semantic_grad"], atol=1e-6)
  assert bool(jnp.all(out["semantic_grad"][jnp.array([0, 5])] == 0.0))


def test_a_nan_logit_or_a_traced_bad_label_is_never_read_as_infeasible():
  """Either makes its example, and both losses, NaN; the others are unchanged.

  semantic_loss used to drop a NaN example as infeasible (6.08 instead of
  NaN, 7.77 clean); a digit 12 was clipped to 9 or dropped.
  """
  clean = jnp.asarray(np.random.default_rng(2).normal(size=(6, 4, 10)),
                      jnp.float32)
  labels = jnp.asarray(nesy.sum_to_digits([3, 90, 7, 150, 0, 33], 2))
  labels = labels.at[2].set(jnp.array([9, 9, 1]))  # infeasible
  reference = _exact_and_losses(clean, labels)
  assert bool(jnp.isfinite(reference["semantic"]))
  for logits, labels_, bad in (
      (clean.at[0, 0, 0].set(jnp.nan).at[2, 1, 4].set(jnp.nan), labels,
       [0, 2]),
      (clean, labels.at[1, 0].set(12).at[4, 2].set(-1), [1, 4])):
    out = _exact_and_losses(logits, labels_)
    assert bool(jnp.isnan(out["semantic"])) and bool(jnp.isnan(out["em"]))
    good = np.setdiff1d(np.arange(6), bad)
    for value, expected in zip(out["posterior"], reference["posterior"]):
      assert bool(jnp.all(jnp.isnan(value[np.array(bad)])))
      np.testing.assert_array_equal(value[good], expected[good])


def test_traced_digits_outside_0_to_9_never_satisfy():
  """12 + 0 used to "carry" into [2, 1]; [0, 12] indexed world 12 (1 + 2)."""
  satisfied = _satisfied(
      jnp.array([[12, 0, 0, 0], [2, 0, 0, 0], [0, -1, 0, 1], [0, 0, 0, 0]]),
      jnp.array([[2, 1, 0], [2, 0, 0], [0, 0, 0], [0, 0, 0]]))
  assert satisfied.tolist() == [False, True, False, True]
  table = nesy.addition_program(1)
  satisfied = jax.vmap(table.satisfied)(jnp.array([[0, 12], [1, 2]]),
                                        jnp.array([3, 3]))
  assert satisfied.tolist() == [False, True]


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

