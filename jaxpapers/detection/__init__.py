"""Detection: BUTR-style query budgets, top-K query selection, box IoU and recall.

A toy tiny-object world: Gaussian blob images (:func:`blob_images`) and a fixed
LoG encoder (:func:`log_proposals`, :func:`proposal_scores`).
"""

from jaxpapers import _deprecation
from jaxpapers.detection._blobs import DEFAULT_SCALES
from jaxpapers.detection._blobs import BlobImages
from jaxpapers.detection._blobs import Proposals
from jaxpapers.detection._blobs import Calibration
from jaxpapers.detection._blobs import blob_images
from jaxpapers.detection._blobs import log_proposals
from jaxpapers.detection._blobs import proposal_labels
from jaxpapers.detection._blobs import fit_calibration
from jaxpapers.detection._blobs import proposal_scores
from jaxpapers.detection._boxes import box_iou
from jaxpapers.detection._boxes import box_recall
from jaxpapers.detection._boxes import covered_ground_truth
from jaxpapers.detection._budget import budget_from_count
from jaxpapers.detection._budget import Budgeter
from jaxpapers.detection._budget import butr
from jaxpapers.detection._budget import check_scores
from jaxpapers.detection._budget import confidences
from jaxpapers.detection._budget import dq_detr
from jaxpapers.detection._budget import fixed
from jaxpapers.detection._budget import NO_BUDGET
from jaxpapers.detection._budget import QuerySelection
from jaxpapers.detection._budget import select_queries
from jaxpapers.detection._budget import share_batch_max
from jaxpapers.detection._budget import soft_count
from jaxpapers.detection._budget import top_k_queries

__all__ = [
    "DEFAULT_SCALES",
    "BlobImages",
    "Proposals",
    "Calibration",
    "blob_images",
    "log_proposals",
    "proposal_labels",
    "fit_calibration",
    "proposal_scores",
    "box_iou",
    "box_recall",
    "covered_ground_truth",
    "budget_from_count",
    "Budgeter",
    "butr",
    "check_scores",
    "confidences",
    "dq_detr",
    "fixed",
    "NO_BUDGET",
    "QuerySelection",
    "select_queries",
    "share_batch_max",
    "soft_count",
    "top_k_queries",
]

_deprecation.install(__name__)
