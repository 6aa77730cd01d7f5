"""jaxpapers.detection under Auto and Explicit meshes gives the unsharded numbers.

Budgets and top-K selection vmap over a batch of images sharded along the
mesh's data axis; the IoU matrix is sharded along both of its box axes.
The blob world's generator maps a batch of keys sharded along "data"; its
encoder, labels and scores take images and proposals sharded along both
axes, and the calibration fit a response vector sharded along "model".
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import detection
from jaxpapers.detection import _blobs as blobs
from tests import sharding_checks

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


def _blob_images(keys):
  """Two 16 x 16 images of 1..8 blobs per key of a batch of keys."""
  return jax.vmap(lambda key: blobs.blob_images(key, 2, size=16,
                                                count_range=(1, 8)))(keys)


# Host-made stand-ins for the generator's and the encoder's outputs (no
# compilation at import): 16 x 16 images, 8 padded true boxes, 16 proposals.
_COUNTS_B = _rng.integers(1, 9, 8)
_BLOBS = blobs.BlobImages(
    jnp.asarray(_rng.normal(size=(8, 16, 16)), jnp.float32), _boxes(8, 8),
    jnp.asarray(np.arange(8)[None, :] < _COUNTS_B[:, None]),
    jnp.asarray(_COUNTS_B, jnp.int32))
_BLOB_SPECS = blobs.BlobImages(jax.P("data", "model"), jax.P("data", "model"),
                               jax.P("data", "model"), jax.P("data"))
_PROPOSALS = blobs.Proposals(
    jnp.asarray(_rng.normal(size=(8, 16)), jnp.float32), _boxes(8, 16))
_PROPOSAL_SPECS = blobs.Proposals(jax.P("data", "model"),
                                  jax.P("data", "model"))
_RESPONSE_M = jnp.asarray(_rng.normal(size=32), jnp.float32)
_LABELS_M = jnp.asarray(
    _rng.uniform(size=32) < 1 / (1 + np.exp(-2 * np.asarray(_RESPONSE_M))))
_CALIBRATION = blobs.Calibration(jnp.float32(1.5), jnp.float32(-0.5))

_DATA = jax.P("data")
CASES = {
    # Coordinates sharded along the model axis.
    "detection.box_iou+detection.covered_ground_truth": (
        detection.box_iou, (_boxes(8), _boxes(12)),
        (jax.P("data", "model"), jax.P(None, "model"))),
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
    "detection.blob_images": (
        _blob_images, (jax.random.split(jax.random.key(1), 4),), (_DATA,)),
    "detection.log_proposals": (
        blobs.log_proposals, (_BLOBS.images,), (jax.P("data", "model"),)),
    "detection.proposal_labels": (
        lambda proposals, data: blobs.proposal_labels(proposals, data, 0.3),
        (_PROPOSALS, _BLOBS),
        (_PROPOSAL_SPECS, _BLOB_SPECS)),
    "detection.fit_calibration": (
        lambda r, y: blobs.fit_calibration(r, y, num_newton_steps=3),
        (_RESPONSE_M, _LABELS_M), (jax.P("model"), jax.P("model"))),
    "detection.proposal_scores": (
        blobs.proposal_scores, (_CALIBRATION, _PROPOSALS),
        (None, _PROPOSAL_SPECS)),
}


# Also compared in value (which cases, and why: tests/README.md).
NUMERIC_CASES = {
    "detection.proposal_labels": ("Explicit",),
    "detection.confidences+detection.dq_detr+detection.share_batch_max+"
    "detection.top_k_queries": ("Auto",),
}


(test_sharded_call_traces_like_the_unsharded_call,
 test_sharded_inputs_give_the_unsharded_numbers) = (
     sharding_checks.contract_tests(CASES, NUMERIC_CASES))
