"""jaxpapers.detection: a table of misuse, each a named error."""

import jax
import jax.numpy as jnp
import pytest

from jaxpapers import detection
from jaxpapers.detection import _blobs as blobs

_box = jnp.array([[0.0, 0.0, 2.0, 2.0]])
_scores = jnp.array([0.9, 0.5, 0.1])
_budget_kwargs = {"rate": 1.5, "margin": 50, "k_min": 100, "k_max": 900}
_swapped = jnp.array([[2.0, 0.0, 0.0, 2.0]])  # x1 < x0: its IoU with itself was 0
_nan_box = jnp.array([[0.0, 0.0, jnp.nan, 2.0]])
_key = jax.random.key(0)
_images = jnp.zeros((1, 8, 8))
_response = jnp.array([0.0, 1.0, 2.0, 3.0])
_labels = jnp.array([False, True, False, True])
_proposals = blobs.Proposals(jnp.zeros((1, 2)),
                             jnp.tile(_box, (1, 2, 1)))
_data = blobs.BlobImages(_images, jnp.tile(_box, (1, 3, 1)),
                         jnp.ones((1, 3), jnp.bool_), jnp.array([3]))

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
     "k_max must be an int >= 100"),
    (lambda: detection.budget_from_count(
        jnp.float32(3), **{**_budget_kwargs, "margin": 2.5}), TypeError,
     "margin must be an int"),
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
     ValueError, "max_budget must be an int >= 1"),
    (lambda: detection.select_queries(detection.fixed(5), _scores), ValueError,
     "the budget floor 5 is above the proposal count 3"),
    (lambda: detection.fixed(0), ValueError, "k must be an int >= 1"),
    (lambda: detection.select_queries(lambda s: 2, _scores), TypeError,
     "budgeter must be a Budgeter"),
    (lambda: detection.butr(rate=0.5), ValueError, "rate must be >= 1"),
    (lambda: detection.dq_detr(budgets=(300, 500)), ValueError,
     "budgets needs one entry more than count_thresholds"),
    # Swapped corners, NaN and inf coordinates (concrete): named, not IoU 0.
    (lambda: detection.box_iou(_swapped, _swapped), ValueError,
     r"boxes_a_Nx4 must be \(x0, y0, x1, y1\) with x1 >= x0 .*swapped"),
    (lambda: detection.box_iou(_box, _swapped[:, [0, 3, 2, 1]]), ValueError,
     "boxes_b_Mx4 must be .* y1 >= y0"),
    (lambda: detection.box_iou(_nan_box, _box), ValueError,
     "boxes_a_Nx4 must hold finite coordinates"),
    (lambda: detection.box_iou(_box, _box.at[0, 2].set(jnp.inf)), ValueError,
     "boxes_b_Mx4 must hold finite coordinates"),
    (lambda: detection.covered_ground_truth(_swapped, _box), ValueError,
     "truth_Gx4 must be .*swapped"),
    (lambda: detection.box_recall(_box, _nan_box), ValueError,
     "proposals_Px4 must hold finite coordinates"),
    (lambda: detection.box_recall(_box, _box.astype(jnp.float16)), TypeError,
     "truth_Gx4 and proposals_Px4 must have the same dtype"),
    (lambda: detection.box_recall(_box.astype(jnp.int32), _box), TypeError,
     "truth_Gx4 must be floating point"),
    (lambda: detection.box_recall(_box, _box[:, :3]), ValueError,
     r"proposals_Px4 must have shape \(num_boxes, 4\)"),
    (lambda: detection.covered_ground_truth(_box, _box,
                                            iou_threshold=float("nan")),
     ValueError, r"iou_threshold must be in \(0, 1\]"),
    (lambda: jax.jit(lambda t: detection.box_recall(_box, _box,
                                                    iou_threshold=t))(0.5),
     TypeError, "iou_threshold must be a concrete number"),
    (lambda: detection.covered_ground_truth(
        _box, _box, proposals_valid_P=jnp.ones(1, jnp.int32)), ValueError,
     "proposals_valid_P must be a bool array"),
    # Budgets and selection.
    (lambda: detection.top_k_queries(_scores, jnp.int32(-3), max_budget=2),
     ValueError, "budget must be >= 0"),
    (lambda: detection.top_k_queries(_scores, -1, max_budget=2), ValueError,
     "budget must be >= 0"),
    (lambda: detection.top_k_queries(_scores, jnp.bool_(True), max_budget=2),
     ValueError, "budget must be an integer scalar"),
    (lambda: detection.top_k_queries(_scores, jnp.array([1, 2]), max_budget=2),
     ValueError, "budget must be an integer scalar"),
    (lambda: detection.top_k_queries(_scores, 2, max_budget=4), ValueError,
     "max_budget 4 is above the proposal count 3"),
    (lambda: detection.top_k_queries(_scores, 2, max_budget=2.0), TypeError,
     "max_budget must be an int"),
    (lambda: detection.top_k_queries(_scores.at[1].set(jnp.nan), 2,
                                     max_budget=2), ValueError,
     r"scores_N must be confidences in \[0, 1\]; got 1 outside \(NaN"),
    (lambda: detection.check_scores(jnp.zeros(0)), ValueError,
     "scores_N is an empty proposal set"),
    (lambda: detection.check_scores(_scores, 0), ValueError,
     "floor must be an int >= 1"),
    (lambda: detection.check_scores(_scores[None]), ValueError,
     "scores_N must be 1-D"),
    (lambda: detection.confidences(jnp.ones((3, 0))), ValueError,
     "num_classes >= 1"),
    (lambda: jax.jit(lambda t: detection.soft_count(_scores, t))(0.2),
     TypeError, "threshold must be a concrete number"),
    (lambda: detection.soft_count(_scores, float("nan")), ValueError,
     r"threshold must be a confidence in \[0, 1\]"),
    (lambda: detection.budget_from_count(jnp.float32(jnp.nan),
                                         **_budget_kwargs), ValueError,
     "count must be finite and >= 0"),
    (lambda: detection.budget_from_count(jnp.array([3.0, -1.0]),
                                         **_budget_kwargs), ValueError,
     "count must be finite and >= 0 .* got -1.0"),
    (lambda: detection.budget_from_count(jnp.inf, **_budget_kwargs),
     ValueError, "count must be finite"),
    (lambda: detection.budget_from_count(
        jnp.float32(3), **{**_budget_kwargs, "rate": float("inf")}),
     ValueError, r"rate must be > 0 \(queries per object\) and finite"),
    (lambda: detection.budget_from_count(
        jnp.float32(3), **{**_budget_kwargs, "rate": float("nan")}),
     ValueError, "rate must be > 0"),
    (lambda: detection.budget_from_count(
        jnp.float32(3), **{**_budget_kwargs, "rate": "1.5"}), TypeError,
     "rate must be a real number"),
    (lambda: detection.budget_from_count(
        jnp.float32(3), **{**_budget_kwargs, "k_min": 0}), ValueError,
     "k_min must be an int >= 1"),
    (lambda: detection.butr(rate=float("inf")), ValueError,
     r"rate must be >= 1 \(a conservative budget\) and finite"),
    (lambda: detection.butr(threshold=float("nan")), ValueError,
     r"threshold must be a confidence in \[0, 1\]"),
    (lambda: detection.butr(margin=-1), ValueError, "margin must be an int >= 0"),
    (lambda: detection.butr(k_min=True), TypeError,
     "k_min must be an int"),
    (lambda: detection.fixed(2.0), TypeError, "k must be an int"),
    (lambda: detection.dq_detr(count_thresholds=(float("nan"), 100, 500)),
     ValueError, "count_thresholds must be finite counts >= 0"),
    (lambda: detection.dq_detr(count_thresholds=(-1, 100, 500)), ValueError,
     "count_thresholds must be finite counts >= 0"),
    (lambda: detection.dq_detr(budgets=(0, 500, 900, 1500)), ValueError,
     "budgets entry must be an int >= 1"),
    (lambda: detection.dq_detr(budgets=(900, 500, 300, 1500)), ValueError,
     "must be non-decreasing"),
    (lambda: detection.share_batch_max(jnp.zeros(0, jnp.int32)), ValueError,
     "budgets_B is empty"),
    (lambda: detection.share_batch_max(jnp.array([300, detection.NO_BUDGET])),
     ValueError, "budgets_B must be >= 0"),
    # The blob world.
    (lambda: blobs.blob_images(_key, -1, size=8, count_range=(1, 2)),
     ValueError, "num_images must be an int >= 0"),
    (lambda: blobs.blob_images(_key, 2.0, size=8, count_range=(1, 2)),
     TypeError, "num_images must be an int"),
    (lambda: blobs.blob_images(_key, 1, size=0, count_range=(1, 2)),
     ValueError, "size must be an int >= 1"),
    (lambda: blobs.blob_images(_key, 1, size=8, count_range=(4, 2)),
     ValueError, "count_range must be 1 <= low <= high"),
    (lambda: blobs.blob_images(_key, 1, size=8, count_range=(1.5, 4)),
     TypeError, "count_range entry must be an int"),
    (lambda: blobs.blob_images(_key, 1, size=8, count_range=(1, 2),
                               sigma_range=(0.0, 1.0)), ValueError,
     "sigma_range must be finite with 0 < low <= high"),
    (lambda: blobs.blob_images(_key, 1, size=8, count_range=(1, 2),
                               sigma_range=(1.0, float("nan"))), ValueError,
     "sigma_range must be finite"),
    (lambda: blobs.blob_images(_key, 1, size=8, count_range=(1, 2),
                               noise_std=-0.1), ValueError,
     "noise_std must be finite and >= 0"),
    (lambda: blobs.blob_images(_key, 1, size=8, count_range=(1, 2),
                               noise_std=float("nan")), ValueError,
     "noise_std must be finite and >= 0"),
    (lambda: blobs.log_proposals(_images, stride=0), ValueError,
     "stride must be an int >= 1"),
    (lambda: blobs.log_proposals(jnp.zeros((1, 0, 8))), ValueError,
     "must be a positive multiple of stride"),
    (lambda: blobs.log_proposals(_images[0]), ValueError,
     r"images_BxHxW must be \(batch, height, width\)"),
    (lambda: blobs.log_proposals(_images.astype(jnp.complex64)), TypeError,
     "images_BxHxW must be real"),
    (lambda: blobs.log_proposals(_images, scales=()), ValueError,
     "scales must be finite, positive and increasing"),
    (lambda: blobs.log_proposals(_images, scales=(2.0, 1.0)), ValueError,
     "scales must be finite, positive and increasing"),
    (lambda: blobs.log_proposals(_images, scales=(0.0, 1.0)), ValueError,
     "scales must be finite, positive and increasing"),
    (lambda: blobs.proposal_labels(
        _proposals, _data._replace(boxes=jnp.tile(_box, (2, 3, 1)))),
     ValueError, "proposals.boxes and data.boxes must be .* of one batch"),
    (lambda: blobs.proposal_labels(
        _proposals._replace(boxes=_proposals.boxes.at[0, 1, 0].set(jnp.nan)),
        _data), ValueError, "proposals.boxes must hold finite coordinates"),
    (lambda: blobs.proposal_labels(
        _proposals, _data._replace(boxes=_data.boxes.at[0, 2].set(
            _swapped[0]))), ValueError, "data.boxes must be .*swapped"),
    (lambda: blobs.proposal_labels(
        _proposals, _data._replace(valid=jnp.ones((1, 3), jnp.int32))),
     ValueError, "data.valid must be a bool array"),
    (lambda: blobs.proposal_labels(_proposals, _data, iou_threshold=1.5),
     ValueError, r"iou_threshold must be in \(0, 1\]"),
    (lambda: blobs.fit_calibration(_response, _labels, num_newton_steps=0),
     ValueError, "num_newton_steps must be an int >= 1"),
    (lambda: blobs.fit_calibration(jnp.zeros(0), jnp.zeros(0, jnp.bool_)),
     ValueError, "response_M is empty"),
    (lambda: blobs.fit_calibration(_response.at[1].set(jnp.nan), _labels),
     ValueError, "response_M must be finite"),
    (lambda: blobs.fit_calibration(_response, jnp.array([0, 255, 0, 255])),
     ValueError, "labels_M must be bool or 0/1 labels"),
    # Separated classes: Newton used to return weights that only grow.
    (lambda: blobs.fit_calibration(_response, _response >= 2), ValueError,
     "labels_M are separated by a threshold on response_M"),
    (lambda: blobs.fit_calibration(_response, _response < 1), ValueError,
     "labels_M are separated"),
    (lambda: blobs.fit_calibration(_response, jnp.ones(4, jnp.bool_)),
     ValueError, "labels_M holds one class only"),
]


@pytest.mark.parametrize("index", range(len(MISUSE)))
def test_misuse_is_a_named_error(index):
  call, error, message = MISUSE[index]
  with pytest.raises(error, match=message):
    call()
