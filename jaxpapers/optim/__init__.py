"""optax transforms from the papers."""

from jaxpapers.optim.track_batch_sharpness import track_batch_sharpness
from jaxpapers.optim.track_batch_sharpness import TrackBatchSharpnessState
