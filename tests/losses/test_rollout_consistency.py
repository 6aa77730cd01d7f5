"""Rollout-consistency penalty: closed forms, second-order agreement, layouts."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import losses

L, C = 6, 2  # lookback rows, channels


def _mlp_params(key, p_out, width=16):
  k1, k2 = jax.random.split(key)
  return {"w1": 0.5 * jax.random.normal(k1, (L * C, width)),
          "w2": 0.5 * jax.random.normal(k2, (width, p_out * C))}


def _mlp(params, state_LxC):
  """A smooth direct forecaster: (L, C) -> (P_out, C)."""
  hidden = jnp.tanh(state_LxC.reshape(-1) @ params["w1"])
  return jnp.sin(hidden @ params["w2"]).reshape(-1, C)


def _linear(params, state_LxC):
  """One-step linear forecaster: (L, C) -> (1, C)."""
  return (params["w"] @ state_LxC.reshape(-1) + params["b"]).reshape(1, C)


@pytest.fixture(scope="module")
def linear_problem():
  k1, k2, k3, k4 = jax.random.split(jax.random.key(0), 4)
  params = {"w": jax.random.normal(k1, (C, L * C)),
            "b": jax.random.normal(k2, (C,))}
  return params, jax.random.normal(k3, (L, C)), jax.random.normal(k4, (1, C))


def test_surrogate_agrees_with_exact_form_to_second_order():
  """|L_RC - L_JVP| = O(eps^3) while both are O(eps^2): halving eps divides the gap by 8."""
  # A generic draw: at other draws the O(eps^3) and O(eps^4) terms can
  # nearly cancel at eps = 0.2, and the ratio reaches 8 only at smaller eps.
  params = _mlp_params(jax.random.key(11), p_out=3)
  context = jax.random.normal(jax.random.key(12), (L, C))
  prediction = _mlp(params, context)
  direction = jax.random.normal(jax.random.key(13), (3, C))
  surrogate = jax.jit(functools.partial(losses.rollout_consistency, _mlp,
                                        feedback_len=2))
  exact_form = jax.jit(functools.partial(losses.rollout_consistency_exact,
                                         _mlp, feedback_len=2))
  gaps, relative = [], []
  for eps in (0.2, 0.1, 0.05, 0.025):
    # The residual prediction - target is exactly eps * direction.
    target = prediction - eps * direction
    jvp = surrogate(params, context, target)
    exact = exact_form(params, context, target)
    gaps.append(abs(float(exact - jvp)))
    relative.append(abs(float(exact / jvp - 1)))
  ratios = np.array(gaps[:-1]) / np.array(gaps[1:])
  assert np.all((ratios > 6.5) & (ratios < 9.5)), ratios
  rel_ratios = np.array(relative[:-1]) / np.array(relative[1:])
  assert np.all((rel_ratios > 1.6) & (rel_ratios < 2.4)), rel_ratios
  assert relative[-1] < 0.05


def test_linear_model_exact_form_equals_surrogate(linear_problem):
  params, context, target = linear_problem
  jvp = losses.rollout_consistency(_linear, params, context, target)
  exact = losses.rollout_consistency_exact(_linear, params, context, target)
  np.testing.assert_allclose(jvp, exact, rtol=1e-5)
  residual = _linear(params, context) - target  # (1, C), lands in the last row
  w_last = params["w"][:, -C:]
  np.testing.assert_allclose(jvp, np.sum((w_last @ residual[0]) ** 2) / C,
                             rtol=1e-5)


def test_stop_gradient_matches_hand_derived_gradient(linear_problem):
  """L = |W_last r|^2 / C with r = W s + b - y the residual in the newest slot.

  With sg(delta): dL/dW_last = (2/C) (W_last r) r^T, every other gradient 0.
  Without: r also depends on (W, b), adding g_r = (2/C) W_last^T W_last r to
  dL/db and g_r s^T to dL/dW.
  """
  params, context, target = linear_problem
  w, s = params["w"], context.reshape(-1)
  r = w @ s + params["b"] - target[0]
  w_last = w[:, -C:]
  jr = w_last @ r
  expected_w = np.zeros(w.shape, np.float32)
  expected_w[:, -C:] = (2 / C) * np.outer(jr, r)

  loss = lambda p, sg: losses.rollout_consistency(
      _linear, p, context, target, stop_gradient=sg)
  grads = jax.grad(loss)(params, True)
  np.testing.assert_allclose(grads["w"], expected_w, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(grads["b"], np.zeros(C), atol=1e-7)

  g_r = (2 / C) * (w_last.T @ jr)
  grads = jax.grad(loss)(params, False)
  np.testing.assert_allclose(grads["b"], g_r, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(grads["w"], expected_w + np.outer(g_r, s),
                             rtol=1e-5, atol=1e-5)


def test_zero_residual_gives_zero_penalty_and_gradient(linear_problem):
  params, context, _ = linear_problem
  target = _linear(params, context)
  for normalize in ("none", "unit"):
    loss = lambda p: losses.rollout_consistency(
        _linear, p, context, target, normalize=normalize)
    assert float(loss(params)) == 0.0
    grads = jax.grad(loss)(params)
    assert all(float(jnp.max(jnp.abs(g))) == 0.0 for g in jax.tree.leaves(grads))


def test_unit_normalization_is_invariant_to_residual_scale(linear_problem):
  params, context, target = linear_problem
  prediction = _linear(params, context)
  values = [
      losses.rollout_consistency(_linear, params, context,
                                 prediction - scale * (prediction - target),
                                 normalize="unit")
      for scale in (0.1, 1.0, 10.0)
  ]
  np.testing.assert_allclose(values, values[1], rtol=1e-4)
  plain = losses.rollout_consistency(_linear, params, context, target)
  delta_sq = np.sum(np.asarray(prediction - target) ** 2)
  np.testing.assert_allclose(values[1], plain / delta_sq, rtol=1e-5)


def _explicit_penalty(fn, params, base, delta):
  """|J(base) vec(delta)|^2 / size with a materialised Jacobian."""
  jac = jax.jacfwd(lambda s: fn(params, s).reshape(-1))(base)
  change = jac.reshape(jac.shape[0], -1) @ delta.reshape(-1)
  return np.sum(np.asarray(change) ** 2) / change.size


def test_block_feedback_with_output_length_unlike_state_length():
  """P_out = 3 predicted rows, P = 2 fed back into an L = 6 row window."""
  params = _mlp_params(jax.random.key(4), p_out=3)
  context = jax.random.normal(jax.random.key(5), (L, C))
  target = jax.random.normal(jax.random.key(6), (3, C))
  prediction = _mlp(params, context)
  teacher = jnp.concatenate([context[2:], target[:2]])
  delta = jnp.zeros((L, C)).at[-2:].set(prediction[:2] - target[:2])
  for linearize_at, base in (("teacher", teacher), ("free", teacher + delta)):
    got = losses.rollout_consistency(_mlp, params, context, target,
                                     feedback_len=2, linearize_at=linearize_at)
    np.testing.assert_allclose(got, _explicit_penalty(_mlp, params, base, delta),
                               rtol=1e-4)
  # Default feedback_len for a direct model is min(24, P_out) = 3 rows.
  delta3 = jnp.zeros((L, C)).at[-3:].set(prediction - target)
  teacher3 = jnp.concatenate([context[3:], target])
  np.testing.assert_allclose(
      losses.rollout_consistency(_mlp, params, context, target),
      _explicit_penalty(_mlp, params, teacher3, delta3), rtol=1e-4)


def _calendar_feedback(state_Lx3, block_Px1):
  """Block enters channel 0; channels 1-2 are a calendar phase advanced from data."""
  p = block_Px1.shape[0]
  angle = 2 * jnp.pi / 12
  rotation = jnp.array([[jnp.cos(angle), -jnp.sin(angle)],
                        [jnp.sin(angle), jnp.cos(angle)]])
  phase = state_Lx3[-1, 1:]
  future = []
  for _ in range(p):
    phase = rotation @ phase
    future.append(phase)
  new_rows = jnp.concatenate([block_Px1, jnp.stack(future)], axis=1)
  return jnp.concatenate([state_Lx3[p:], new_rows])


def test_user_feedback_with_exogenous_channels_perturbs_only_fed_back_slots():
  w = 0.3 * jax.random.normal(jax.random.key(7), (L * 3, 2))
  predict = lambda p, s: jnp.tanh(s.reshape(-1) @ p).reshape(2, 1)
  context = jax.random.normal(jax.random.key(8), (L, 3))
  target = jax.random.normal(jax.random.key(9), (2, 1))
  got = losses.rollout_consistency(predict, w, context, target,
                                   feedback=_calendar_feedback)
  teacher = _calendar_feedback(context, target)
  delta = jnp.zeros((L, 3)).at[-2:, 0].set((predict(w, context) - target)[:, 0])
  np.testing.assert_allclose(got, _explicit_penalty(predict, w, teacher, delta),
                             rtol=1e-4)
  # The same model rolled out: calendar channels advance, predictions feed back.
  rollout = losses.free_running_rollout(predict, w, context, 5,
                                        feedback=_calendar_feedback)
  state, rows = context, []
  for _ in range(3):
    block = predict(w, state)
    rows.append(block)
    state = _calendar_feedback(state, block)
  np.testing.assert_allclose(rollout, jnp.concatenate(rows)[:5], rtol=1e-5)


def test_vmap_over_a_batch_matches_per_example_values():
  params = _mlp_params(jax.random.key(10), p_out=1)
  contexts = jax.random.normal(jax.random.key(11), (5, L, C))
  targets = jax.random.normal(jax.random.key(12), (5, 1, C))
  penalty = jax.jit(lambda c, t: losses.rollout_consistency(_mlp, params, c, t))
  batched = jax.jit(jax.vmap(penalty))(contexts, targets)
  assert batched.shape == (5,)
  looped = [penalty(c, t) for c, t in zip(contexts, targets)]
  np.testing.assert_allclose(batched, looped, rtol=1e-5)
  rollouts = jax.vmap(
      lambda c: losses.free_running_rollout(_mlp, params, c, 4))(contexts)
  assert rollouts.shape == (5, 4, C)
  np.testing.assert_allclose(
      rollouts[3], losses.free_running_rollout(_mlp, params, contexts[3], 4),
      rtol=1e-5)


def test_sharded_batch_gives_the_single_device_value():
  params = _mlp_params(jax.random.key(13), p_out=1)
  contexts = jax.random.normal(jax.random.key(14), (16, L, C))
  targets = jax.random.normal(jax.random.key(15), (16, 1, C))
  fn = jax.jit(jax.vmap(
      lambda c, t: losses.rollout_consistency(_mlp, params, c, t)))
  single = fn(contexts, targets)
  mesh = jax.make_mesh((8,), ("batch",),
                       axis_types=(jax.sharding.AxisType.Explicit,))
  sharding = jax.NamedSharding(mesh, jax.P("batch"))
  with jax.set_mesh(mesh):
    multi = fn(jax.device_put(contexts, sharding),
               jax.device_put(targets, sharding))
  assert len(multi.sharding.device_set) == 8
  np.testing.assert_allclose(multi, single, rtol=1e-5)


def test_random_direction_keeps_the_residual_norm_in_fed_back_slots():
  """With an orthogonal W_last, |W_last d| = |d|: a random d of norm |delta| in
  the newest row gives exactly the residual penalty, for any key."""
  q, _ = jnp.linalg.qr(jax.random.normal(jax.random.key(16), (C, C)))
  w = jnp.zeros((C, L * C)).at[:, -C:].set(q)
  w = w.at[:, :C].set(1.0)  # weight on an old row, never perturbed
  params = {"w": w, "b": jnp.zeros((C,))}
  context = jax.random.normal(jax.random.key(17), (L, C))
  target = jax.random.normal(jax.random.key(18), (1, C))
  residual = losses.rollout_consistency(_linear, params, context, target)
  for seed in range(3):
    randomized = losses.rollout_consistency(
        _linear, params, context, target, direction="random",
        key=jax.random.key(seed))
    np.testing.assert_allclose(randomized, residual, rtol=1e-5)


def test_hutchinson_direction_estimates_the_fed_back_frobenius_norm(
    linear_problem):
  params, context, target = linear_problem
  keys = jax.random.split(jax.random.key(19), 4000)
  draws = jax.vmap(lambda k: losses.rollout_consistency(
      _linear, params, context, target, direction="hutchinson", key=k))(keys)
  frobenius = np.sum(np.asarray(params["w"][:, -C:]) ** 2) / C
  np.testing.assert_allclose(np.mean(draws), frobenius, rtol=0.05)


def test_free_running_rollout_of_a_linear_recursion_is_geometric():
  predict = lambda a, s: a * s[-1:]  # x_{t+1} = a x_t
  context = jnp.array([0.0, 0.0, 2.0])
  rollout = losses.free_running_rollout(predict, 0.5, context, 6)
  np.testing.assert_allclose(rollout, 2.0 * 0.5 ** np.arange(1, 7), rtol=1e-6)
  # Gradient through the whole rollout (k-step unrolled training):
  # d/da sum_h 2 a^h = sum_h 2 h a^(h-1).
  grad = jax.grad(
      lambda a: jnp.sum(losses.free_running_rollout(predict, a, context, 6)))(0.5)
  np.testing.assert_allclose(
      grad, np.sum(2 * np.arange(1, 7) * 0.5 ** np.arange(0, 6)), rtol=1e-5)


def test_horizon_errors_match_numpy():
  rng = np.random.default_rng(0)
  pred = rng.normal(size=(4, 5, 3)).astype(np.float32)
  truth = rng.normal(size=(4, 5, 3)).astype(np.float32)
  errors = losses.horizon_errors(jnp.asarray(pred), jnp.asarray(truth))
  np.testing.assert_allclose(errors.mse, ((pred - truth) ** 2).mean((0, 2)),
                             rtol=1e-5)
  np.testing.assert_allclose(errors.mae, np.abs(pred - truth).mean((0, 2)),
                             rtol=1e-5)
  pred[1, 2, 0] = np.nan
  errors = losses.horizon_errors(jnp.asarray(pred), jnp.asarray(truth))
  assert np.isnan(errors.mse[2]) and np.isfinite(errors.mse[1])



def _numpy_valid_steps(pred, truth, threshold):
  """Reference: walk each window until its channel-RMS error is too big."""
  out = []
  for window_pred, window_truth in zip(pred, truth):
    steps = 0
    for row_pred, row_truth in zip(window_pred, window_truth):
      if np.sqrt(np.mean((row_pred - row_truth) ** 2)) > threshold:
        break
      steps += 1
    out.append(steps)
  return np.array(out)


def test_valid_prediction_time_matches_numpy():
  rng = np.random.default_rng(1)
  # Errors that grow along the horizon, as a diverging rollout's do.
  truth = rng.normal(size=(16, 12, 3)).astype(np.float32)
  growth = np.linspace(0.05, 1.5, 12)[None, :, None]
  pred = truth + growth * rng.normal(size=truth.shape).astype(np.float32)
  pred[0] = truth[0]  # never exceeds: valid for the whole horizon
  pred[1, 0] = truth[1, 0] + 10.0  # invalid from the first step
  steps = losses.valid_prediction_time(jnp.asarray(pred), jnp.asarray(truth),
                                       0.4)
  expected = _numpy_valid_steps(pred, truth, 0.4)
  np.testing.assert_array_equal(steps, expected)
  assert expected[0] == 12 and expected[1] == 0
  assert 0 < expected[2:].mean() < 12  # the draw exercises the middle too


def test_free_running_errors_match_a_numpy_rollout():
  """An AR(2) forecaster rolled out by hand in numpy, scored by hand."""
  coefficients = np.array([0.3, 0.6], np.float32)  # weights of x_{t-1}, x_t
  predict = lambda a, s: (s[-2:] @ a)[None]  # (L,) -> (1,)
  rng = np.random.default_rng(2)
  contexts = rng.normal(size=(5, 4)).astype(np.float32)
  truths = rng.normal(size=(5, 7)).astype(np.float32)
  rollouts = np.zeros_like(truths)
  for i, context in enumerate(contexts):
    history = list(context)
    for h in range(7):
      history.append(np.float32(history[-2:] @ coefficients))
      rollouts[i, h] = history[-1]
  errors = losses.free_running_errors(
      predict, jnp.asarray(coefficients), jnp.asarray(contexts),
      jnp.asarray(truths), vpt_threshold=0.8)
  np.testing.assert_allclose(errors.mse, ((rollouts - truths) ** 2).mean(0),
                             rtol=1e-5)
  np.testing.assert_allclose(errors.mae, np.abs(rollouts - truths).mean(0),
                             rtol=1e-5)
  np.testing.assert_array_equal(
      errors.valid_steps, _numpy_valid_steps(rollouts[..., None],
                                             truths[..., None], 0.8))
  assert losses.free_running_errors(
      predict, jnp.asarray(coefficients), jnp.asarray(contexts),
      jnp.asarray(truths)).valid_steps is None


def _slot_mismatch_feedback(state, block):
  return state.at[-1:, 0].set(block[:, 0])  # room for one row only


@pytest.mark.parametrize("kwargs,target_shape,match", [
    ({"feedback_len": 4}, (3, C), "feedback_len must be an int in"),
    ({"feedback_len": 3}, (2, C), "target must hold the true next rows"),
    ({}, (3, C + 1), "target must hold the true next rows"),
    ({"feedback": _slot_mismatch_feedback}, (3, C),
     r"feedback\(state, block\) failed .* \(3, 2\)"),
    ({"feedback": lambda s, b: s[1:]}, (3, C), "shaped like the state"),
    ({"normalize": "l2"}, (3, C), "normalize must be one of"),
    ({"linearize_at": "both"}, (3, C), "linearize_at must be one of"),
    ({"direction": "random"}, (3, C), "pass key="),
])
def test_bad_arguments_are_named_errors(kwargs, target_shape, match):
  params = _mlp_params(jax.random.key(20), p_out=3)
  with pytest.raises(ValueError, match=match):
    losses.rollout_consistency(_mlp, params, jnp.zeros((L, C)),
                               jnp.zeros(target_shape), **kwargs)


def test_default_feedback_rejects_a_block_unlike_the_state_rows():
  """A (P, 1) block cannot fill a row of a (L, 3) state: name the fix."""
  predict = lambda p, s: (s.reshape(-1) @ p).reshape(1, 1)
  with pytest.raises(ValueError, match="default feedback .* Pass feedback="):
    losses.rollout_consistency(predict, jnp.ones((L * 3, 1)), jnp.zeros((L, 3)),
                               jnp.zeros((1, 1)))
  with pytest.raises(ValueError, match="default feedback"):
    losses.free_running_rollout(predict, jnp.ones((L * 3, 1)),
                                jnp.zeros((L, 3)), 4)


def test_rollout_and_metric_shape_errors():
  with pytest.raises(ValueError, match="horizon must be an int >= 1"):
    losses.free_running_rollout(_linear, None, jnp.zeros((L, C)), 0)
  with pytest.raises(ValueError, match="targets must have the shape"):
    losses.horizon_errors(jnp.zeros((2, 3)), jnp.zeros((2, 4)))
  with pytest.raises(ValueError, match="targets must have the shape"):
    losses.valid_prediction_time(jnp.zeros((2, 3)), jnp.zeros((2, 4)), 0.4)
  with pytest.raises(ValueError, match=r"targets must be \(B, H, ...\)"):
    losses.free_running_errors(_linear, None, jnp.zeros((2, L, C)),
                               jnp.zeros((2,)))
  with pytest.raises(ValueError, match="context must be one example's state"):
    losses.rollout_consistency(lambda p, s: s[None], None, jnp.float32(1.0),
                               jnp.zeros((1,)))
