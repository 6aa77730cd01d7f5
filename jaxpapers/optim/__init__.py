"""optax transforms from the papers."""

from jaxpapers.optim.ema_nesterov import ema_nesterov
from jaxpapers.optim.ema_nesterov import ema_nesterov_eval_params
from jaxpapers.optim.ema_nesterov import EmaNesterovState
from jaxpapers.optim.soap import scale_by_soap
from jaxpapers.optim.soap import ScaleBySoapState
from jaxpapers.optim.soap import soap
from jaxpapers.optim.track_batch_sharpness import track_batch_sharpness
from jaxpapers.optim.track_batch_sharpness import TrackBatchSharpnessState
