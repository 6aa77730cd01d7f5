"""Budgeters: monotone and conservative (properties), baselines, top-K vs numpy."""

import math

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import detection

NUM_PROPOSALS = 1024
_BUDGET = {
    "butr": detection.butr(),
    "butr_hard": detection.butr(count="hard"),
    "dq_detr": detection.dq_detr(),
}
_JITTED = {name: jax.jit(b.budget) for name, b in _BUDGET.items()}


def _scores(seed, density):
  """Confidences with about ``density`` of them high (a dense or sparse image)."""
  rng = np.random.default_rng(seed)
  high = rng.uniform(size=NUM_PROPOSALS) < density
  return np.where(high, rng.uniform(0.3, 1.0, NUM_PROPOSALS),
                  rng.uniform(0.0, 0.3, NUM_PROPOSALS)).astype(np.float32)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), density=st.floats(0.0, 1.0),
       index=st.integers(0, NUM_PROPOSALS - 1), new_value=st.floats(0.0, 1.0),
       name=st.sampled_from(sorted(_BUDGET)))
def test_raising_any_confidence_never_lowers_the_budget(seed, density, index,
                                                        new_value, name):
  scores = _scores(seed, density)
  raised = scores.copy()
  raised[index] = max(scores[index], np.float32(new_value))
  assert int(_JITTED[name](raised)) >= int(_JITTED[name](scores))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), density=st.floats(0.0, 1.0),
       num=st.integers(100, 1500))
def test_butr_budget_is_conservative_and_follows_its_rule(seed, density, num):
  scores = np.resize(_scores(seed, density), num)
  k = int(detection.butr().budget(scores))
  assert 100 <= k <= min(900, num)
  count = float(np.sum(np.where(scores >= 0.2, scores, 0), dtype=np.float64))
  expected = min(max(math.ceil(1.5 * count) + 50, 100), 900, num)
  # float32 summation may move the count across an integer boundary.
  assert abs(k - expected) <= 1
  assert k >= min(math.ceil(1.5 * count) + 50, 900, num) - 1  # never under-provisions


def test_budget_is_deterministic_and_has_no_gradient():
  scores = jnp.asarray(_scores(3, 0.2))
  budgeter = detection.butr()
  assert int(budgeter.budget(scores)) == int(budgeter.budget(scores))
  grad = jax.grad(lambda s: budgeter.budget(s).astype(jnp.float32))(scores)
  np.testing.assert_array_equal(np.asarray(grad), 0.0)


def test_budget_tracks_the_count_and_clips():
  scores = np.zeros(NUM_PROPOSALS, np.float32)
  budgeter = detection.butr()
  assert int(budgeter.budget(scores)) == 100  # the floor
  scores[:200] = 1.0
  assert int(budgeter.budget(scores)) == 350  # 1.5 * 200 + 50
  scores[:] = 1.0
  assert int(budgeter.budget(scores)) == 900  # the ceiling
  assert int(detection.butr(k_max=1500).budget(scores)) == NUM_PROPOSALS


@pytest.mark.parametrize("count,expected", [
    (0, 300), (9, 300), (10, 500), (99, 500), (100, 900), (499, 900),
    (500, 1024), (900, 1024)])
def test_dq_detr_buckets(count, expected):
  scores = np.zeros(NUM_PROPOSALS, np.float32)
  scores[:count] = 1.0
  assert int(detection.dq_detr().budget(scores)) == expected


def test_fixed_and_batch_max():
  assert int(detection.fixed(300).budget(jnp.zeros(NUM_PROPOSALS))) == 300
  np.testing.assert_array_equal(
      np.asarray(detection.share_batch_max(jnp.array([100, 700, 300, 200]))),
      [700] * 4)


def test_top_k_with_mask_equals_numpy_sort_and_cut_per_image():
  rng = np.random.default_rng(0)
  scores_BxN = rng.uniform(size=(6, 300)).astype(np.float32)
  scores_BxN[:, ::7] = scores_BxN[:, :1]  # ties: broken by the lower index
  budgets_B = np.array([1, 17, 80, 150, 200, 5], np.int32)
  select = jax.jit(jax.vmap(
      lambda s, k: detection.top_k_queries(s, k, max_budget=200)))
  sel = select(scores_BxN, budgets_B)
  for b in range(6):
    order = np.argsort(-scores_BxN[b], kind="stable")[:budgets_B[b]]
    valid = np.asarray(sel.valid[b])
    assert valid.sum() == budgets_B[b] and valid[:budgets_B[b]].all()
    np.testing.assert_array_equal(np.asarray(sel.indices[b])[valid], order)
    np.testing.assert_array_equal(np.asarray(sel.scores[b])[valid],
                                  scores_BxN[b][order])
  np.testing.assert_array_equal(np.asarray(sel.budget), budgets_B)


def test_select_queries_vmaps_over_images_with_different_budgets():
  scores_BxN = np.stack([_scores(s, d) for s, d in
                         enumerate((0.0, 0.05, 0.3, 0.9))])
  budgeter = detection.butr()
  sel = jax.jit(jax.vmap(lambda s: detection.select_queries(budgeter, s)))(
      scores_BxN)
  ks = [int(budgeter.budget(s)) for s in scores_BxN]
  assert len(set(ks)) == 4 and sel.valid.shape == (4, 900)
  np.testing.assert_array_equal(np.asarray(sel.valid.sum(1)), ks)


def test_confidences_are_max_sigmoid():
  logits = np.random.default_rng(0).normal(size=(50, 3)).astype(np.float32)
  np.testing.assert_allclose(np.asarray(detection.confidences(logits)),
                             (1 / (1 + np.exp(-logits))).max(1), rtol=1e-6)


def test_bad_inputs_are_named_errors():
  budgeter = detection.butr()
  with pytest.raises(ValueError, match="empty proposal set"):
    budgeter.budget(jnp.zeros(0))
  with pytest.raises(ValueError, match=r"in \[0, 1\]"):
    budgeter.budget(jnp.full(200, 1.5))
  with pytest.raises(ValueError, match=r"in \[0, 1\]"):
    budgeter.budget(jnp.full(200, -0.1))
  with pytest.raises(ValueError, match="floor 100 is above the proposal count 50"):
    jax.jit(budgeter.budget)(jnp.zeros(50))
  with pytest.raises(ValueError, match="floor 300"):
    detection.dq_detr().budget(jnp.zeros(200))
  with pytest.raises(ValueError, match="1-D"):
    budgeter.budget(jnp.zeros((2, 200)))
  with pytest.raises(ValueError, match="max_budget 20"):
    detection.top_k_queries(jnp.zeros(10), jnp.int32(3), max_budget=20)


@pytest.mark.parametrize("kwargs,match", [
    ({"rate": 0.5}, "rate"), ({"margin": -1}, "margin"),
    ({"k_min": 0}, "k_min"), ({"k_min": 500, "k_max": 400}, "k_max"),
    ({"threshold": 1.5}, "threshold"), ({"count": "median"}, "count"),
    ({"k_min": 100.0}, "k_min")])
def test_bad_hyperparameters_are_refused_at_construction(kwargs, match):
  with pytest.raises((ValueError, TypeError), match=match):
    detection.butr(**kwargs)


def test_bad_dq_detr_tables_are_refused():
  with pytest.raises(ValueError, match="one entry more"):
    detection.dq_detr(budgets=(300, 500))
  with pytest.raises(ValueError, match="non-decreasing"):
    detection.dq_detr(budgets=(900, 500, 300, 1500))


def test_traced_nan_confidence_flags_every_budget():
  # A NaN confidence used to drop out of the count, lowering the budget.
  scores = jnp.array([0.9, jnp.nan, 0.1, 0.5])
  butr = detection.butr(k_min=1, k_max=3, margin=0)
  dq = detection.dq_detr((1, 2), (1, 2, 3))

  @jax.jit
  def run(scores):
    selection = detection.select_queries(butr, scores)
    clean = detection.select_queries(butr, jnp.nan_to_num(scores))
    return (detection.soft_count(scores, 0.2),
            detection.soft_count(scores, 0.2, "hard"), dq.budget(scores),
            detection.budget_from_count(scores[2] - 1, rate=1.5, margin=0,
                                        k_min=1, k_max=3),
            selection, detection.share_batch_max(jnp.stack(
                [clean.budget, selection.budget])), clean.budget)

  soft, hard, dq_budget, negative, selection, shared, clean = run(scores)
  assert np.isnan(float(soft)) and np.isnan(float(hard))
  assert int(dq_budget) == detection.NO_BUDGET == -1
  assert int(negative) == detection.NO_BUDGET
  assert int(selection.budget) == detection.NO_BUDGET
  assert not np.asarray(selection.valid).any()
  assert np.asarray(shared).tolist() == [-1, -1] and int(clean) == 3
