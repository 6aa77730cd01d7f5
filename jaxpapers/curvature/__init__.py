"""Curvature: Hessian-vector products, eigen-solvers, Batch Sharpness, GNI, SGD tracking it."""

from jaxpapers import _deprecation
from jaxpapers.curvature._batch_sharpness import batch_sharpness
from jaxpapers.curvature._batch_sharpness import batch_sharpness_adaptive
from jaxpapers.curvature._batch_sharpness import BatchSharpnessEstimate
from jaxpapers.curvature._batch_sharpness import directional_curvature
from jaxpapers.curvature._batch_sharpness import gni
from jaxpapers.curvature._batch_sharpness import GNIEstimate
from jaxpapers.curvature._fisher import diagonal_fisher
from jaxpapers.curvature._hvp import check_scalar_loss
from jaxpapers.curvature._hvp import hvp
from jaxpapers.curvature._hvp import linearize_gradient
from jaxpapers.curvature._hvp import quadratic_form
from jaxpapers.curvature._lanczos import lambda_max
from jaxpapers.curvature._lanczos import LambdaMaxResult
from jaxpapers.curvature._stability import gni_at
from jaxpapers.curvature._stability import sgd_steps
from jaxpapers.curvature._stability import SGDSteps
from jaxpapers.curvature._stability import Sharpness
from jaxpapers.curvature._stability import sharpness_at

__all__ = [
    "batch_sharpness",
    "batch_sharpness_adaptive",
    "BatchSharpnessEstimate",
    "directional_curvature",
    "gni",
    "GNIEstimate",
    "diagonal_fisher",
    "check_scalar_loss",
    "hvp",
    "linearize_gradient",
    "quadratic_form",
    "lambda_max",
    "LambdaMaxResult",
    "gni_at",
    "sgd_steps",
    "SGDSteps",
    "Sharpness",
    "sharpness_at",
]

_deprecation.install(__name__)
