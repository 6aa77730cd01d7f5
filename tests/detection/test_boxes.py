"""box_iou and box recall against numpy loops; bad shapes are named errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import detection


def _random_boxes(rng, n):
  corner = rng.uniform(0, 20, size=(n, 2))
  size = rng.uniform(0, 6, size=(n, 2))
  size[rng.uniform(size=n) < 0.1] = 0.0  # some degenerate boxes
  return np.concatenate([corner, corner + size], axis=1).astype(np.float32)


def _numpy_iou(a, b):
  out = np.zeros((len(a), len(b)))
  for i, p in enumerate(a.astype(np.float64)):
    for j, q in enumerate(b.astype(np.float64)):
      w = max(0.0, min(p[2], q[2]) - max(p[0], q[0]))
      h = max(0.0, min(p[3], q[3]) - max(p[1], q[1]))
      union = (p[2] - p[0]) * (p[3] - p[1]) + (q[2] - q[0]) * (q[3] - q[1]) - w * h
      out[i, j] = w * h / union if union > 0 else 0.0
  return out


def test_iou_matches_numpy_loop():
  rng = np.random.default_rng(0)
  a, b = _random_boxes(rng, 30), _random_boxes(rng, 40)
  got = np.asarray(jax.jit(detection.box_iou)(a, b))
  np.testing.assert_allclose(got, _numpy_iou(a, b), atol=1e-6)
  assert got.max() <= 1.0 and got.min() >= 0.0
  np.testing.assert_allclose(np.diag(np.asarray(detection.box_iou(a, a)))[
      _numpy_iou(a, a).diagonal() > 0], 1.0, rtol=1e-6)


def test_recall_matches_numpy_with_masks():
  rng = np.random.default_rng(1)
  truth, props = _random_boxes(rng, 25), _random_boxes(rng, 60)
  truth_valid = rng.uniform(size=25) < 0.8
  props_valid = rng.uniform(size=60) < 0.5
  iou = _numpy_iou(truth, props)
  expected_cover = truth_valid & ((iou >= 0.3) & props_valid[None]).any(1)
  covered = detection.covered_ground_truth(
      truth, props, truth_valid_G=jnp.asarray(truth_valid),
      proposals_valid_P=jnp.asarray(props_valid), iou_threshold=0.3)
  np.testing.assert_array_equal(np.asarray(covered), expected_cover)
  recall = detection.box_recall(
      truth, props, truth_valid_G=jnp.asarray(truth_valid),
      proposals_valid_P=jnp.asarray(props_valid), iou_threshold=0.3)
  assert float(recall) == pytest.approx(expected_cover.sum() / truth_valid.sum())


def test_recall_of_no_objects_is_one():
  truth = jnp.zeros((3, 4))
  recall = detection.box_recall(truth, jnp.ones((2, 4)),
                                truth_valid_G=jnp.zeros(3, jnp.bool_))
  assert float(recall) == 1.0


def test_bad_inputs_are_named():
  with pytest.raises(ValueError, match="boxes_a_Nx4"):
    detection.box_iou(jnp.zeros((3, 3)), jnp.zeros((2, 4)))
  with pytest.raises(TypeError, match="floating"):
    detection.box_iou(jnp.zeros((3, 4), jnp.int32), jnp.zeros((2, 4)))
  with pytest.raises(ValueError, match="iou_threshold"):
    detection.box_recall(jnp.zeros((3, 4)), jnp.zeros((2, 4)), iou_threshold=0.0)
  with pytest.raises(ValueError, match="proposals_valid_P"):
    detection.box_recall(jnp.zeros((3, 4)), jnp.zeros((2, 4)),
                         proposals_valid_P=jnp.ones(3, jnp.bool_))


def test_traced_bad_boxes_give_nan_not_a_smaller_iou_or_recall():
  # A box with swapped corners had IoU 0 with itself, and a NaN box IoU 0
  # with everything: traced (not refusable) both are NaN, recall too.
  good, swapped, nan_box = [0.0, 0.0, 2.0, 2.0], [2.0, 0.0, 0.0, 2.0], [
      0.0, 0.0, jnp.nan, 2.0]
  boxes = jnp.array([good, swapped, nan_box])
  only_good = jnp.array([True, False, False])

  @jax.jit
  def run(boxes):
    return (detection.box_iou(boxes, boxes),
            detection.covered_ground_truth(boxes, boxes[:1]),
            detection.box_recall(boxes, boxes[:1]),
            detection.box_recall(boxes, boxes, truth_valid_G=only_good,
                                 proposals_valid_P=only_good))

  iou, covered, recall, masked_recall = run(boxes)
  expected = np.full((3, 3), np.nan)
  expected[0, 0] = 1.0
  np.testing.assert_array_equal(np.asarray(iou), expected)
  assert np.asarray(covered).tolist() == [True, False, False]
  assert np.isnan(float(recall))
  # Bad boxes masked out as padding are not looked at.
  assert float(masked_recall) == 1.0


def test_padding_is_not_value_checked_eagerly():
  # A valid call: padding rows may hold anything (here NaN and swapped).
  boxes = jnp.array([[0.0, 0.0, 2.0, 2.0], [2.0, 0.0, 0.0, 2.0],
                     [jnp.nan] * 4])
  valid = jnp.array([True, False, False])
  recall = detection.box_recall(boxes, boxes, truth_valid_G=valid,
                                proposals_valid_P=valid)
  assert float(recall) == 1.0
