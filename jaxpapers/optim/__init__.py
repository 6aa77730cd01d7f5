"""optax transforms from the papers."""

from jaxpapers import _deprecation
from jaxpapers.optim._ema_nesterov import ema_nesterov
from jaxpapers.optim._ema_nesterov import ema_nesterov_eval_params
from jaxpapers.optim._ema_nesterov import EmaNesterovState
from jaxpapers.optim._soap import scale_by_soap
from jaxpapers.optim._soap import ScaleBySoapState
from jaxpapers.optim._soap import soap
from jaxpapers.optim._track_batch_sharpness import track_batch_sharpness
from jaxpapers.optim._track_batch_sharpness import TrackBatchSharpnessState

__all__ = [
    "ema_nesterov",
    "ema_nesterov_eval_params",
    "EmaNesterovState",
    "scale_by_soap",
    "ScaleBySoapState",
    "soap",
    "track_batch_sharpness",
    "TrackBatchSharpnessState",
]

_deprecation.install(__name__)
