"""Curvature: Hessian-vector products, eigen-solvers, Batch Sharpness, GNI, SGD tracking it."""

from jaxpapers.curvature.batch_sharpness import batch_sharpness
from jaxpapers.curvature.batch_sharpness import batch_sharpness_adaptive
from jaxpapers.curvature.batch_sharpness import BatchSharpnessEstimate
from jaxpapers.curvature.batch_sharpness import directional_curvature
from jaxpapers.curvature.batch_sharpness import gni
from jaxpapers.curvature.batch_sharpness import GNIEstimate
from jaxpapers.curvature.fisher import diagonal_fisher
from jaxpapers.curvature.hvp import check_scalar_loss
from jaxpapers.curvature.hvp import hvp
from jaxpapers.curvature.hvp import linearize_gradient
from jaxpapers.curvature.hvp import quadratic_form
from jaxpapers.curvature.lanczos import lambda_max
from jaxpapers.curvature.lanczos import LambdaMaxResult
from jaxpapers.curvature.stability import gni_at
from jaxpapers.curvature.stability import sgd_steps
from jaxpapers.curvature.stability import SGDSteps
from jaxpapers.curvature.stability import Sharpness
from jaxpapers.curvature.stability import sharpness_at
