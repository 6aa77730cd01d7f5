"""Losses and penalties: rollout consistency for forecasters, free-running errors."""

from jaxpapers.losses.rollout_consistency import free_running_errors
from jaxpapers.losses.rollout_consistency import free_running_rollout
from jaxpapers.losses.rollout_consistency import FreeRunningErrors
from jaxpapers.losses.rollout_consistency import horizon_errors
from jaxpapers.losses.rollout_consistency import HorizonErrors
from jaxpapers.losses.rollout_consistency import rollout_consistency
from jaxpapers.losses.rollout_consistency import rollout_consistency_exact
from jaxpapers.losses.rollout_consistency import shift_feedback
from jaxpapers.losses.rollout_consistency import teacher_forcing_loss
from jaxpapers.losses.rollout_consistency import unrolled_loss
from jaxpapers.losses.rollout_consistency import valid_prediction_time
