"""The blob world: generator statistics, LoG proposals on a lone blob, the fit vs sklearn."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from jaxpapers import detection
from jaxpapers.detection import _blobs as blobs


@pytest.fixture(scope="module")
def lone_blobs():
  """64 images of one blob each, 32 x 32 px."""
  return blobs.blob_images(jax.random.key(0), 64, size=32, count_range=(1, 1))


def test_generator_counts_boxes_and_pixels(lone_blobs):
  data = blobs.blob_images(jax.random.key(0), 64, size=32, count_range=(1, 50))
  counts = np.asarray(data.counts)
  assert counts.min() >= 1 and counts.max() <= 50
  assert np.all(np.asarray(data.valid).sum(1) == counts)
  # Log-uniform: about half the images hold at most sqrt(51) ~ 7 objects.
  assert 0.3 < np.mean(counts <= 7) < 0.7
  boxes = np.asarray(data.boxes)
  widths = boxes[..., 2] - boxes[..., 0]
  assert np.all((widths >= 4 * 0.7 - 1e-4) & (widths <= 4 * 2.0 + 1e-4))
  np.testing.assert_allclose(widths, boxes[..., 3] - boxes[..., 1], rtol=1e-5)
  # One blob alone: the brightest pixel is the one nearest its centre.
  centres = np.asarray(lone_blobs.boxes[:, 0, :2] + lone_blobs.boxes[:, 0, 2:]) / 2
  sigmas = np.asarray(lone_blobs.boxes[:, 0, 2] - lone_blobs.boxes[:, 0, 0]) / 4
  for image, centre in zip(np.asarray(lone_blobs.images)[sigmas > 1.5],
                           centres[sigmas > 1.5]):  # wide: the peak beats noise
    row, col = np.unravel_index(np.argmax(image), image.shape)
    assert abs(col + 0.5 - centre[0]) <= 1 and abs(row + 0.5 - centre[1]) <= 1


def test_strongest_proposal_of_a_lone_blob_covers_it(lone_blobs):
  data = lone_blobs
  centres = (data.boxes[:, 0, :2] + data.boxes[:, 0, 2:]) / 2
  # Away from the border, where the zero-padded LoG sees the whole blob.
  interior = np.asarray(jnp.all((centres > 8) & (centres < 24), axis=1))
  assert interior.sum() >= 8
  props = blobs.log_proposals(data.images)
  best = jnp.argmax(props.response, axis=1)
  best_boxes = jnp.take_along_axis(props.boxes, best[:, None, None], axis=1)
  iou = jax.vmap(detection.box_iou)(best_boxes, data.boxes[:, :1])[:, 0, 0]
  assert np.all(np.asarray(iou)[interior] >= 0.6), np.asarray(iou)[interior]


def test_calibration_matches_sklearn_unpenalised_logistic_regression():
  rng = np.random.default_rng(0)
  response = rng.normal(size=2000).astype(np.float32)
  labels = rng.uniform(size=2000) < 1 / (1 + np.exp(-(2.0 * response - 1.0)))
  cal = blobs.fit_calibration(jnp.asarray(response), jnp.asarray(labels))
  reference = LogisticRegression(C=np.inf, tol=1e-10, max_iter=1000).fit(
      response[:, None], labels)
  assert float(cal.weight) == pytest.approx(reference.coef_[0, 0], rel=1e-3)
  assert float(cal.bias) == pytest.approx(reference.intercept_[0], rel=1e-3)
  scores = blobs.proposal_scores(cal, blobs.Proposals(jnp.asarray(response), None))
  assert float(scores.min()) >= 0.0 and float(scores.max()) <= 1.0


def test_bad_inputs_are_named():
  with pytest.raises(ValueError, match="one class"):
    blobs.fit_calibration(jnp.zeros(4), jnp.zeros(4, jnp.bool_))
  with pytest.raises(ValueError, match="multiple of stride"):
    blobs.log_proposals(jnp.zeros((1, 30, 32)))
  with pytest.raises(ValueError, match="count_range"):
    blobs.blob_images(jax.random.key(0), 1, count_range=(0, 4))


def test_traced_separable_or_non_binary_labels_give_a_nan_fit():
  # Separated classes have no finite fit: Newton's weights would only grow.
  response = jnp.array([0.0, 1.0, 2.0, 3.0])
  fit = jax.jit(lambda r, y: blobs.fit_calibration(r, y, num_newton_steps=5))
  for labels in ([0.0, 0.0, 1.0, 1.0], [0.0, 255.0, 0.0, 255.0]):
    cal = fit(response, jnp.array(labels))
    assert np.isnan(float(cal.weight)) and np.isnan(float(cal.bias))
  cal = fit(response, jnp.array([0.0, 1.0, 0.0, 1.0]))
  assert float(cal.weight) == pytest.approx(0.91, abs=0.01)
