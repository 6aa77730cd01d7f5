"""Detection: BUTR-style query budgets, top-K query selection, box IoU and recall.

A toy tiny-object world (Gaussian blob images and a fixed LoG encoder) lives
in :mod:`jaxpapers.detection.blobs`.
"""

from jaxpapers.detection import blobs
from jaxpapers.detection.boxes import box_iou
from jaxpapers.detection.boxes import box_recall
from jaxpapers.detection.boxes import covered_ground_truth
from jaxpapers.detection.budget import budget_from_count
from jaxpapers.detection.budget import Budgeter
from jaxpapers.detection.budget import butr
from jaxpapers.detection.budget import check_scores
from jaxpapers.detection.budget import confidences
from jaxpapers.detection.budget import dq_detr
from jaxpapers.detection.budget import fixed
from jaxpapers.detection.budget import NO_BUDGET
from jaxpapers.detection.budget import QuerySelection
from jaxpapers.detection.budget import select_queries
from jaxpapers.detection.budget import share_batch_max
from jaxpapers.detection.budget import soft_count
from jaxpapers.detection.budget import top_k_queries
