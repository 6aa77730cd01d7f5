"""Time series that ship with statsmodels or that we generate, split in time.

Real series (statsmodels bundles them; nothing is downloaded):

* ``co2``: weekly Mauna Loa CO2 (ppm), 1958-2001, 2284 weeks; the 59 missing
  weeks are filled by linear interpolation in time.
* ``sunspots``: yearly sunspot activity, 1700-2008, 309 years.
* ``elnino``: monthly sea surface temperature of the El Nino region,
  1950-2010, 732 months (the table's 61 years x 12 months, read in time order).
* ``macrodata``: US quarterly macro data, 1959Q1-2009Q3; log-differences of
  realgdp, realcons, realinv, realgovt, realdpi, cpi and m1 (202 x 7).

Generated: the Lorenz-96 system, integrated in JAX with RK4.

Forecasting data are then split chronologically and z-normalised with the
training segment's statistics only (:func:`chronological_split`), and cut
into (context, next rows) windows whose truth never crosses a segment end
(:func:`sliding_windows`).
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers._checks import check_int

STATSMODELS_SERIES = ("co2", "sunspots", "elnino", "macrodata")
_MACRO_CHANNELS = ("realgdp", "realcons", "realinv", "realgovt", "realdpi",
                   "cpi", "m1")
_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP",
           "OCT", "NOV", "DEC")


class Series(NamedTuple):
  """A multichannel series, oldest row first."""

  values: np.ndarray  # (T, C) float32
  channels: tuple[str, ...]
  provenance: str


def load_series(name: str) -> Series:
  """Loads one of :data:`STATSMODELS_SERIES` from statsmodels' bundled files.

  Args:
    name: ``"co2"``, ``"sunspots"``, ``"elnino"`` or ``"macrodata"``.

  Returns:
    A :class:`Series` with float32 ``(T, C)`` values and a provenance string
    naming the statsmodels version and the preprocessing.
  """
  if name not in STATSMODELS_SERIES:
    raise ValueError(
        f"name must be one of {STATSMODELS_SERIES}, got {name!r}."
    )
  try:
    import statsmodels  # pylint: disable=g-import-not-at-top
    from statsmodels import datasets  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise ImportError(
        "load_series needs statsmodels: pip install 'jaxpapers[experiments]'."
    ) from e
  source = f"statsmodels.datasets.{name} (statsmodels {statsmodels.__version__})"
  if name == "co2":
    frame = datasets.co2.load_pandas().data
    raw = frame["co2"].to_numpy(np.float64)
    missing = np.isnan(raw)
    weeks = np.arange(raw.size)
    values = np.interp(weeks, weeks[~missing], raw[~missing])[:, None]
    detail = (f"weekly Mauna Loa CO2 (ppm), {frame.index[0]:%Y-%m-%d} to"
              f" {frame.index[-1]:%Y-%m-%d}, {raw.size} weeks;"
              f" {int(missing.sum())} missing weeks linearly interpolated")
    channels = ("co2",)
  elif name == "sunspots":
    frame = datasets.sunspots.load_pandas().data
    values = frame[["SUNACTIVITY"]].to_numpy(np.float64)
    detail = (f"yearly sunspot activity, {int(frame['YEAR'].iloc[0])} to"
              f" {int(frame['YEAR'].iloc[-1])}, {len(frame)} years")
    channels = ("sunactivity",)
  elif name == "elnino":
    frame = datasets.elnino.load_pandas().data
    values = frame[list(_MONTHS)].to_numpy(np.float64).reshape(-1, 1)
    detail = (f"monthly El Nino sea surface temperature (C),"
              f" {int(frame['YEAR'].iloc[0])} to {int(frame['YEAR'].iloc[-1])},"
              f" {values.shape[0]} months (year-by-month table read in time"
              " order)")
    channels = ("sst",)
  else:
    frame = datasets.macrodata.load_pandas().data
    values = np.diff(np.log(frame[list(_MACRO_CHANNELS)].to_numpy(np.float64)),
                     axis=0)
    detail = (f"US quarterly macro data {int(frame['year'].iloc[0])}Q1 to"
              f" {int(frame['year'].iloc[-1])}Q{int(frame['quarter'].iloc[-1])},"
              f" log-differences of {', '.join(_MACRO_CHANNELS)}"
              f" ({values.shape[0]} quarters)")
    channels = _MACRO_CHANNELS
  return Series(values.astype(np.float32), channels, f"{source}: {detail}")


def lorenz96_tendency(x: jax.Array, forcing: float) -> jax.Array:
  r"""Lorenz-96 right-hand side, :math:`(x_{i+1} - x_{i-2})\, x_{i-1} - x_i + F` (cyclic).

  Example:
    >>> import jax.numpy as jnp
    >>> lorenz96_tendency(jnp.full(5, 8.0, jnp.float32), 8.0)  # x = F: at rest
    Array([0., 0., 0., 0., 0.], dtype=float32)
  """
  return ((jnp.roll(x, -1, axis=-1) - jnp.roll(x, 2, axis=-1))
          * jnp.roll(x, 1, axis=-1) - x + forcing)


@functools.partial(jax.jit, static_argnames=("num_samples", "observe_every"))
def lorenz96_trajectory(x0: jax.Array, forcing: float, dt: float, *,
                        num_samples: int, observe_every: int) -> jax.Array:
  """RK4 from ``x0``; returns ``(num_samples, N)`` states, one every ``observe_every`` steps.

  The first returned state is ``observe_every`` steps after ``x0``.
  """

  def rk4(x, _):
    k1 = lorenz96_tendency(x, forcing)
    k2 = lorenz96_tendency(x + 0.5 * dt * k1, forcing)
    k3 = lorenz96_tendency(x + 0.5 * dt * k2, forcing)
    k4 = lorenz96_tendency(x + dt * k3, forcing)
    return x + (dt / 6) * (k1 + 2 * k2 + 2 * k3 + k4), None

  def observe(x, _):
    x, _ = jax.lax.scan(rk4, x, None, length=observe_every)
    return x, x

  return jax.lax.scan(observe, x0, None, length=num_samples)[1]


def lorenz96(*, num_samples: int = 5000, num_dims: int = 8,
             forcing: float = 8.0, dt: float = 0.01, observe_every: int = 5,
             burn_in: int = 1000, noise: float = 0.01, seed: int = 0) -> Series:
  """A Lorenz-96 series: chaotic for ``forcing = 8`` and ``num_dims >= 5``.

  Starts at ``forcing`` with a small random kick, integrates ``burn_in`` RK4
  steps onto the attractor, then records ``num_samples`` states and adds
  Gaussian observation noise of ``noise`` times each channel's std.

  Args:
    num_samples: number of observed rows T.
    num_dims: number of variables N (channels).
    forcing: F.
    dt: RK4 step.
    observe_every: RK4 steps between observations.
    burn_in: RK4 steps discarded first (rounded up to whole observations).
    noise: observation noise, relative to each channel's std.
    seed: seed of the initial kick and of the noise.

  Returns:
    A :class:`Series` with float32 ``(num_samples, num_dims)`` values.
  """
  for name, value, low in (("num_dims", num_dims, 4),
                           ("num_samples", num_samples, 1),
                           ("observe_every", observe_every, 1),
                           ("burn_in", burn_in, 0), ("seed", seed, 0)):
    check_int(name, value, low)
  # NaN fails every comparison: "not >=" / "not >" refuse it too.
  if not (np.isfinite(noise) and noise >= 0):
    raise ValueError(f"noise must be >= 0 and finite, got {noise}.")
  if not (np.isfinite(dt) and dt > 0):
    raise ValueError(f"dt must be > 0 and finite, got {dt}.")
  if not np.isfinite(forcing):
    raise ValueError(f"forcing must be finite, got {forcing}.")
  kick_key, noise_key = jax.random.split(jax.random.key(seed))
  x0 = forcing + 0.01 * jax.random.normal(kick_key, (num_dims,))
  num_burn = -(-burn_in // observe_every)
  states = lorenz96_trajectory(x0, forcing, dt, num_samples=num_burn + num_samples,
                               observe_every=observe_every)[num_burn:]
  scale = noise * jnp.std(states, axis=0, keepdims=True)
  states = states + scale * jax.random.normal(noise_key, states.shape)
  provenance = (
      f"Lorenz-96 generated in JAX: N={num_dims}, F={forcing:g}, RK4"
      f" dt={dt:g}, every {observe_every}th step observed"
      f" ({observe_every * dt:g} time units), {num_burn * observe_every}"
      f" burn-in steps, {num_samples} samples, Gaussian noise {noise:g} x std,"
      f" seed {seed}"
  )
  return Series(np.asarray(states, np.float32),
                tuple(f"x{i}" for i in range(num_dims)), provenance)


class ChronologicalSplit(NamedTuple):
  """A series z-normalised with training statistics, and its segment ends.

  Segments are ``[0, train_end)``, ``[train_end, val_end)`` and
  ``[val_end, T)``.
  """

  values: np.ndarray  # (T, C) float32, (raw - mean) / std
  mean: np.ndarray  # (C,) of the training segment
  std: np.ndarray  # (C,) of the training segment
  train_end: int
  val_end: int

  def segment(self, name: str) -> tuple[int, int]:
    """``(start, stop)`` of ``"train"``, ``"val"`` or ``"test"``."""
    bounds = {"train": (0, self.train_end),
              "val": (self.train_end, self.val_end),
              "test": (self.val_end, self.values.shape[0])}
    if name not in bounds:
      raise ValueError(f"segment must be one of {tuple(bounds)}, got {name!r}.")
    return bounds[name]

  def windows(self, name: str, lookback: int, horizon: int, *,
              stride: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """:func:`sliding_windows` whose truths lie in segment ``name``.

    Contexts may reach back into the previous segment: the past is observed
    at forecast time.
    """
    start, stop = self.segment(name)
    return sliding_windows(self.values, lookback, horizon, start=start,
                           stop=stop, stride=stride)


def chronological_split(
    values: np.ndarray, fractions: tuple[float, float, float] = (0.7, 0.1, 0.2)
) -> ChronologicalSplit:
  """Splits ``(T, C)`` values in time and z-normalises with the train segment.

  Args:
    values: ``(T, C)`` raw series, oldest row first.
    fractions: train, validation and test fractions (positive, summing to 1).

  Returns:
    A :class:`ChronologicalSplit`; segment lengths are rounded down, the test
    segment takes the remainder.
  """
  values = np.asarray(values, np.float64)
  if values.ndim != 2:
    raise ValueError(f"values must be (T, C), got shape {values.shape}.")
  fractions = tuple(fractions)
  if (len(fractions) != 3
      or not all(np.isfinite(f) and f > 0 for f in fractions)
      or not abs(sum(fractions) - 1) <= 1e-6):
    raise ValueError(
        "fractions must be three positive (train, val, test) fractions summing"
        f" to 1, got {fractions}."
    )
  total = values.shape[0]
  train_end = int(fractions[0] * total)
  val_end = train_end + int(fractions[1] * total)
  if not 2 <= train_end < val_end < total:
    raise ValueError(
        f"a series of {total} rows is too short for fractions {fractions}."
    )
  if not np.all(np.isfinite(values)):
    raise ValueError("values contain NaN or inf; fill or drop them first.")
  mean = values[:train_end].mean(axis=0)
  std = values[:train_end].std(axis=0)
  if np.any(std == 0):
    raise ValueError(
        f"channels {np.flatnonzero(std == 0).tolist()} are constant over the"
        " training segment and cannot be z-normalised."
    )
  return ChronologicalSplit(((values - mean) / std).astype(np.float32),
                            mean.astype(np.float32), std.astype(np.float32),
                            train_end, val_end)


def sliding_windows(values: np.ndarray, lookback: int, horizon: int, *,
                    start: int = 0, stop: int | None = None,
                    stride: int = 1) -> tuple[np.ndarray, np.ndarray]:
  """Every (context, truth) pair whose truth lies in ``[start, stop)``.

  The context is the ``lookback`` rows before the truth and may reach back
  before ``start`` (the past is observed at forecast time); windows whose
  truth would cross ``stop`` or whose context would start before row 0 are
  dropped.

  Args:
    values: ``(T, C)`` series.
    lookback: context rows L.
    horizon: truth rows H.
    start: first row a truth may hold.
    stop: one past the last such row (default T).
    stride: step between consecutive windows' first truth rows.

  Returns:
    ``(contexts (N, L, C), truths (N, H, C))``, N >= 1.
  """
  values = np.asarray(values)
  if values.ndim != 2:
    raise ValueError(f"values must be (T, C), got shape {values.shape}.")
  stop = values.shape[0] if stop is None else stop
  for name, value in (("lookback", lookback), ("horizon", horizon),
                      ("stride", stride)):
    check_int(name, value, 1)
  for name, value in (("start", start), ("stop", stop)):
    check_int(name, value, 0)
  if not 0 <= start < stop <= values.shape[0]:
    raise ValueError(
        f"need 0 <= start < stop <= T = {values.shape[0]}, got start={start},"
        f" stop={stop}."
    )
  firsts = np.arange(max(start, lookback), stop - horizon + 1, stride)
  if firsts.size == 0:
    raise ValueError(
        f"no window fits: truth rows [{start}, {stop}) cannot hold"
        f" horizon={horizon} after lookback={lookback}."
    )
  contexts = values[firsts[:, None] + np.arange(-lookback, 0)]
  truths = values[firsts[:, None] + np.arange(horizon)]
  return contexts, truths
