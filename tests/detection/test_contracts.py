"""jaxpapers.detection: a table of misuse, each a named error."""

import jax.numpy as jnp
import pytest

from jaxpapers import detection

_box = jnp.array([[0.0, 0.0, 2.0, 2.0]])
_scores = jnp.array([0.9, 0.5, 0.1])
_budget_kwargs = {"rate": 1.5, "margin": 50, "k_min": 100, "k_max": 900}

MISUSE = [
    (lambda: detection.box_iou(_box, _box.astype(jnp.bfloat16)), TypeError,
     "boxes_a_Nx4 and boxes_b_Mx4 must have the same dtype"),
    (lambda: detection.box_iou(_box[0], _box), ValueError,
     r"boxes_a_Nx4 must have shape \(num_boxes, 4\)"),
    (lambda: detection.covered_ground_truth(_box, _box, iou_threshold=0.0),
     ValueError, r"iou_threshold must be in \(0, 1\]"),
    (lambda: detection.box_recall(_box, _box, truth_valid_G=jnp.ones(1)),
     ValueError, "truth_valid_G must be a bool array"),
    # A misspelt counter used to count "soft" silently.
    (lambda: detection.soft_count(_scores, 0.2, "Hard"), ValueError,
     "count must be one of"),
    (lambda: detection.soft_count(_scores, 2.0), ValueError,
     r"threshold must be a confidence in \[0, 1\]"),
    (lambda: detection.soft_count(_scores * 4, 0.2), ValueError,
     r"scores_N must be confidences in \[0, 1\]"),
    (lambda: detection.budget_from_count(
        jnp.float32(3), **{**_budget_kwargs, "k_max": 50}), ValueError,
     "k_max must be >= 100"),
    (lambda: detection.budget_from_count(
        jnp.float32(3), **{**_budget_kwargs, "margin": 2.5}), TypeError,
     "margin must be a Python int"),
    (lambda: detection.budget_from_count(
        jnp.float32(3), **{**_budget_kwargs, "rate": 0.0}), ValueError,
     "rate must be > 0"),
    (lambda: detection.share_batch_max(jnp.ones((2, 3), jnp.int32)), ValueError,
     "budgets_B must be a 1-D integer array"),
    (lambda: detection.share_batch_max(jnp.ones(3)), ValueError,
     "budgets_B must be a 1-D integer array"),
    (lambda: detection.confidences(jnp.ones((3, 2), jnp.int32)), TypeError,
     "class_logits_NxC must be floating point"),
    (lambda: detection.confidences(jnp.ones(3)), ValueError,
     r"class_logits_NxC must have shape \(num_proposals, num_classes\)"),
    (lambda: detection.check_scores(jnp.ones(3, jnp.int32)), TypeError,
     "scores_N must be floating point"),
    (lambda: detection.top_k_queries(_scores, jnp.float32(2), max_budget=2),
     ValueError, "budget must be an integer scalar"),
    (lambda: detection.top_k_queries(_scores, jnp.int32(2), max_budget=0),
     ValueError, "max_budget must be >= 1"),
    (lambda: detection.select_queries(detection.fixed(5), _scores), ValueError,
     "the budget floor 5 is above the proposal count 3"),
    (lambda: detection.fixed(0), ValueError, "k must be >= 1"),
    (lambda: detection.butr(rate=0.5), ValueError, "rate must be >= 1"),
    (lambda: detection.dq_detr(budgets=(300, 500)), ValueError,
     "budgets needs one entry more than count_thresholds"),
]


@pytest.mark.parametrize("index", range(len(MISUSE)))
def test_misuse_is_a_named_error(index):
  call, error, message = MISUSE[index]
  with pytest.raises(error, match=message):
    call()
