"""jaxpapers.detection under Auto and Explicit meshes gives the unsharded numbers.

Budgets and top-K selection vmap over a batch of images sharded along the
mesh's data axis; the IoU matrix is sharded along both of its box axes.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import detection

_rng = np.random.default_rng(0)
_SCORES_BxN = jnp.asarray(_rng.uniform(size=(8, 16)), jnp.float32)
_LOGITS_BxNxC = jnp.asarray(_rng.normal(size=(8, 16, 4)), jnp.float32)


def _boxes(*shape):
  corner = _rng.uniform(0, 8, shape + (2,))
  size = _rng.uniform(0.5, 4, shape + (2,))
  return jnp.asarray(np.concatenate([corner, corner + size], -1), jnp.float32)


_TRUTH_BxGx4, _PROPOSALS_BxPx4 = _boxes(8, 4), _boxes(8, 8)
_TRUTH_VALID_BxG = jnp.asarray(_rng.uniform(size=(8, 4)) < 0.7)
_PROPOSALS_VALID_BxP = jnp.asarray(_rng.uniform(size=(8, 8)) < 0.7)


def _selected(budgeter):
  """The budgets and top-K(x) selection of every image of the batch."""
  def run(scores_BxN):
    return jax.vmap(lambda s: detection.select_queries(budgeter, s))(scores_BxN)
  return run


def _recall(truth, proposals, truth_valid, proposals_valid):
  recall = lambda *args: detection.box_recall(
      args[0], args[1], truth_valid_G=args[2], proposals_valid_P=args[3],
      iou_threshold=0.3)
  return jax.vmap(recall)(truth, proposals, truth_valid, proposals_valid)


def _covered(truth, proposals):
  return jax.vmap(detection.covered_ground_truth)(truth, proposals)


def _batch_max_selection(logits_BxNxC):
  scores_BxN = jax.vmap(detection.confidences)(logits_BxNxC)
  budgeter = detection.dq_detr(count_thresholds=(2, 4), budgets=(3, 5, 8))
  budgets_B = detection.share_batch_max(jax.vmap(budgeter.budget)(scores_BxN))
  return jax.vmap(lambda s, k: detection.top_k_queries(s, k, max_budget=8))(
      scores_BxN, budgets_B)


def _counted_budgets(scores_BxN):
  def one(scores_N):
    detection.check_scores(scores_N)
    count = detection.soft_count(scores_N, 0.5, "hard")
    return detection.budget_from_count(count, rate=1.5, margin=1, k_min=2,
                                       k_max=12)
  return jax.vmap(one)(scores_BxN)


_DATA = jax.P("data")
CASES = {
    "detection.box_iou": (detection.box_iou, (_boxes(8), _boxes(12)),
                          (jax.P("data"), jax.P("model"))),
    "detection.box_recall": (
        _recall, (_TRUTH_BxGx4, _PROPOSALS_BxPx4, _TRUTH_VALID_BxG,
                  _PROPOSALS_VALID_BxP), (_DATA,) * 4),
    "detection.covered_ground_truth": (
        _covered, (_TRUTH_BxGx4, _PROPOSALS_BxPx4),
        (jax.P("data", "model"), _DATA)),
    "detection.butr+detection.select_queries": (
        _selected(detection.butr(threshold=0.5, margin=1, k_min=2, k_max=10)),
        (_SCORES_BxN,), (_DATA,)),
    "detection.fixed": (_selected(detection.fixed(5)), (_SCORES_BxN,),
                        (jax.P("data", "model"),)),
    "detection.confidences+detection.dq_detr+detection.share_batch_max"
    "+detection.top_k_queries": (_batch_max_selection, (_LOGITS_BxNxC,),
                                 (jax.P("data", None, "model"),)),
    "detection.check_scores+detection.soft_count+detection.budget_from_count": (
        _counted_budgets, (_SCORES_BxN,), (jax.P("data", "model"),)),
}


@pytest.mark.parametrize("mode", ["Auto", "Explicit"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_sharded_inputs_give_the_unsharded_numbers(name, mode,
                                                   check_sharded_call):
  check_sharded_call(CASES[name], mode)
