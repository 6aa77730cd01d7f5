"""Losses and penalties: rollout consistency for forecasters, free-running errors."""

from jaxpapers import _deprecation
from jaxpapers.losses._rollout_consistency import free_running_errors
from jaxpapers.losses._rollout_consistency import free_running_rollout
from jaxpapers.losses._rollout_consistency import FreeRunningErrors
from jaxpapers.losses._rollout_consistency import horizon_errors
from jaxpapers.losses._rollout_consistency import HorizonErrors
from jaxpapers.losses._rollout_consistency import rollout_consistency
from jaxpapers.losses._rollout_consistency import rollout_consistency_exact
from jaxpapers.losses._rollout_consistency import shift_feedback
from jaxpapers.losses._rollout_consistency import teacher_forcing_loss
from jaxpapers.losses._rollout_consistency import unrolled_loss
from jaxpapers.losses._rollout_consistency import valid_prediction_time

__all__ = [
    "free_running_errors",
    "free_running_rollout",
    "FreeRunningErrors",
    "horizon_errors",
    "HorizonErrors",
    "rollout_consistency",
    "rollout_consistency_exact",
    "shift_feedback",
    "teacher_forcing_loss",
    "unrolled_loss",
    "valid_prediction_time",
]

_deprecation.install(__name__)
