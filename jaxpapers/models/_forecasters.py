"""Small nnx forecasters that map one lookback window to the next rows.

Both models read a window ``(L, C)`` without batch axis (``jax.vmap`` them)
relative to its newest row and add that row back to their output, as NLinear
does: a forecast then moves with the level of the series, so a trend that
leaves the training range (CO2) stays within reach of a model fitted on
z-normalised training data. Both are translation-equivariant in time-series
level: adding a constant to every row of the window adds it to the forecast.
"""

import numbers

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import tree
from jaxpapers._checks import check_int


def moving_average(x_LxC: jax.Array, kernel: int) -> jax.Array:
  """Centred moving average over rows with edge replication (DLinear's trend).

  The window is padded with ``(kernel - 1) // 2`` copies of its first row in
  front and the rest of ``kernel - 1`` copies of its last row behind, so the
  output keeps the ``L`` rows of the input. Applied as one constant ``(L, L)``
  matrix: a matmul is far cheaper on CPU than XLA's cumulative sums.

  Example:
    >>> import jax.numpy as jnp
    >>> moving_average(jnp.array([[0.0], [3.0], [6.0]]), 3)[:, 0]
    Array([1., 3., 5.], dtype=float32)
  """
  if jnp.ndim(x_LxC) != 2:
    raise ValueError(f"x_LxC must have shape (L, C), got {jnp.shape(x_LxC)}.")
  num_rows = x_LxC.shape[0]
  if (not isinstance(kernel, numbers.Integral) or isinstance(kernel, bool)
      or not 1 <= kernel <= num_rows):
    raise ValueError(f"kernel must lie in [1, L={num_rows}], got {kernel}.")
  spec = tree.explicit_spec(x_LxC)
  # Rows sharded along Explicit axes are summed over; channels keep theirs.
  rows = None if spec is None else jax.P(None, *spec[1:])
  return jnp.matmul(jnp.asarray(_averaging_matrix(num_rows, kernel),
                                x_LxC.dtype), x_LxC, out_sharding=rows)


def _averaging_matrix(num_rows: int, kernel: int) -> np.ndarray:
  front = (kernel - 1) // 2
  padded_rows = np.concatenate([np.zeros(front, np.int64), np.arange(num_rows),
                                np.full(kernel - 1 - front, num_rows - 1)])
  matrix = np.zeros((num_rows, num_rows))
  for i in range(num_rows):
    np.add.at(matrix[i], padded_rows[i:i + kernel], 1.0 / kernel)
  return matrix


class DLinear(nnx.Module):
  """DLinear-style linear forecaster: trend/remainder split, one linear map each.

  The window (relative to its newest row) is split into a moving-average trend
  and the remainder; each part is flattened and mapped linearly to the
  ``out_rows x C`` forecast, so channels may mix (for a single channel this
  is DLinear). The model is linear in the window.

  Example (flax nnx training step), forecasting a sine 2 rows ahead:
    >>> import jax, numpy as np, optax
    >>> from flax import nnx
    >>> from jaxpapers import optim
    >>> rows = np.arange(16)[:, None] + np.arange(10)  # 16 windows of 8 + 2
    >>> series = np.sin(rows / 3.0)[..., None].astype(np.float32)
    >>> windows, targets = series[:, :8], series[:, 8:]
    >>> model = DLinear(8, 1, 2, moving_average=3, rngs=nnx.Rngs(0))
    >>> loss = lambda m: jnp.mean((jax.vmap(m)(windows) - targets) ** 2)
    >>> optimizer = nnx.Optimizer(
    ...     model, optim.ema_nesterov(optax.sgd(0.005, momentum=0.9)),
    ...     wrt=nnx.Param)
    >>> @nnx.jit
    ... def train_step(model, optimizer):
    ...   value, grads = nnx.value_and_grad(loss)(model)
    ...   optimizer.update(model, grads)
    ...   return value
    >>> losses = [train_step(model, optimizer) for _ in range(10)]
    >>> bool(losses[-1] < losses[0])
    True
  """

  def __init__(self, lookback: int, channels: int, out_rows: int, *,
               moving_average: int = 25, rngs: nnx.Rngs):
    _check_sizes(lookback=lookback, channels=channels, out_rows=out_rows,
                 moving_average=moving_average)
    self.lookback, self.channels = lookback, channels
    self.out_rows = out_rows
    self.kernel = min(moving_average, lookback)
    self.trend = nnx.Linear(lookback * channels, out_rows * channels, rngs=rngs)
    self.remainder = nnx.Linear(lookback * channels, out_rows * channels,
                                rngs=rngs)

  def __call__(self, window_LxC: jax.Array) -> jax.Array:
    _check_window(window_LxC, self.lookback, self.channels)
    newest = window_LxC[-1:]
    x = window_LxC - newest
    trend = moving_average(x, self.kernel)
    out = (self.trend(_flatten(trend), out_sharding=_replicated(x))
           + self.remainder(_flatten(x - trend), out_sharding=_replicated(x)))
    return jnp.reshape(out, (self.out_rows, -1),
                       out_sharding=_replicated(x)) + newest


class MLPForecaster(nnx.Module):
  """An MLP on the flattened window (GELU), relative to the newest row.

  Example (flax nnx training step), forecasting a sine 2 rows ahead:
    >>> import jax, numpy as np, optax
    >>> from flax import nnx
    >>> from jaxpapers import optim
    >>> rows = np.arange(16)[:, None] + np.arange(10)  # 16 windows of 8 + 2
    >>> series = np.sin(rows / 3.0)[..., None].astype(np.float32)
    >>> windows, targets = series[:, :8], series[:, 8:]
    >>> model = MLPForecaster(8, 1, 2, hidden=(16, 16), rngs=nnx.Rngs(0))
    >>> loss = lambda m: jnp.mean((jax.vmap(m)(windows) - targets) ** 2)
    >>> optimizer = nnx.Optimizer(
    ...     model, optim.ema_nesterov(optax.sgd(0.02, momentum=0.9)),
    ...     wrt=nnx.Param)
    >>> @nnx.jit
    ... def train_step(model, optimizer):
    ...   value, grads = nnx.value_and_grad(loss)(model)
    ...   optimizer.update(model, grads)
    ...   return value
    >>> losses = [train_step(model, optimizer) for _ in range(10)]
    >>> bool(losses[-1] < losses[0])
    True
  """

  def __init__(self, lookback: int, channels: int, out_rows: int, *,
               hidden: tuple[int, int] = (128, 128), rngs: nnx.Rngs):
    if len(hidden) != 2:
      raise ValueError(f"hidden must hold two widths, got {hidden}.")
    _check_sizes(lookback=lookback, channels=channels, out_rows=out_rows,
                 **{"hidden[0]": hidden[0], "hidden[1]": hidden[1]})
    self.lookback, self.channels = lookback, channels
    self.out_rows = out_rows
    self.hidden1 = nnx.Linear(lookback * channels, hidden[0], rngs=rngs)
    self.hidden2 = nnx.Linear(hidden[0], hidden[1], rngs=rngs)
    self.out = nnx.Linear(hidden[1], out_rows * channels, rngs=rngs)

  def __call__(self, window_LxC: jax.Array) -> jax.Array:
    _check_window(window_LxC, self.lookback, self.channels)
    newest = window_LxC[-1:]
    x = window_LxC - newest
    h = jax.nn.gelu(self.hidden1(_flatten(x), out_sharding=_replicated(x)))
    h = jax.nn.gelu(self.hidden2(h, out_sharding=_replicated(x)))
    out = self.out(h, out_sharding=_replicated(x))
    return jnp.reshape(out, (self.out_rows, -1),
                       out_sharding=_replicated(x)) + newest


def _check_sizes(**sizes):
  for name, value in sizes.items():
    check_int(name, value, 1)


def _check_window(window_LxC, lookback, channels):
  """Raises ``ValueError`` unless the window is one unbatched ``(L, C)`` window."""
  if jnp.shape(window_LxC) != (lookback, channels):
    raise ValueError(
        f"window_LxC must have shape (lookback, channels) = {(lookback, channels)}"
        f" (one window; jax.vmap over a batch), got {jnp.shape(window_LxC)}.")


def _flatten(x_LxC):
  """The window as one vector; on Explicit axes, sharded channels are gathered first.

  (Merging a sharded minor axis into a major one has no sharding.)
  """
  return jnp.reshape(x_LxC, -1, out_sharding=_replicated(x_LxC))


def _replicated(x):
  """``out_sharding`` of a replicated array on Explicit axes, else None."""
  return None if tree.explicit_spec(x) is None else jax.P(None)
