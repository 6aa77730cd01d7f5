"""Empirical complexity: how a method's measured cost grows against a bound.

A bound known only up to its constant, such as rounds ~ L_xy or oracle calls
~ L_xy + sqrt(L_xy L_xx), still predicts how the cost grows with a problem
constant. On log-log axes a rate x^a is a line of slope a and the constant
drops out, so measured and predicted costs are compared through their
least-squares log-log slopes.
"""

import math
from typing import Any, Sequence

import numpy as np


def loglog_slope(xs: Sequence[float], values: Sequence[float]) -> float | None:
  """The least-squares slope of log ``values`` in log ``xs`` (None from one).

  Raises:
    ValueError: unless ``xs`` and ``values`` are equally long and positive.
  """
  _check_positive_series("xs", xs, len(xs))
  _check_positive_series("values", values, len(xs))
  if len(xs) < 2:
    return None
  return float(np.polyfit(np.log(xs), np.log(values), 1)[0])


def growth_against_bound(xs: Sequence[float], measured: Sequence[float],
                         bound: Sequence[float] | None = None, *,
                         tolerance: float, measured_complete: bool = True
                         ) -> dict[str, Any]:
  """Compares the growth of ``measured`` costs in ``xs`` with a ``bound``'s.

  Args:
    xs: the problem constant at each measurement (positive).
    measured: the cost at each x.
    bound: the bound at each x, up to a constant; None where there is none.
    tolerance: the largest difference of log-log slopes that agrees.
    measured_complete: False when some cost only bounds the true one from
      below (e.g. the method ran out of budget there): then no measured
      slope is fitted.

  Returns:
    ``measured_relative`` and ``predicted_relative`` (costs over the first
    one), ``measured_slope`` and ``predicted_slope`` (see
    :func:`loglog_slope`) and ``agrees`` (None without both slopes).

  Example:
    >>> from jaxpapers import saddle
    >>> growth = saddle.growth_against_bound(
    ...     [1.0, 10.0, 100.0], [300, 290, 330], [1.0, 1.0, 1.0],
    ...     tolerance=0.25)
    >>> round(growth["measured_slope"], 3), growth["agrees"]
    (0.021, True)
  """
  # An infinite tolerance would let every slope agree.
  if not (tolerance >= 0 and math.isfinite(tolerance)):
    raise ValueError(f"tolerance must be >= 0 and finite, got {tolerance!r}.")
  _check_positive_series("xs", xs, len(xs))
  _check_positive_series("measured", measured, len(xs))
  if bound is not None:
    _check_positive_series("bound", bound, len(xs))
  measured = np.asarray(measured, np.float64)
  growth = {"measured_relative": (measured / measured[0]).tolist(),
            "measured_slope": (loglog_slope(xs, measured)
                               if measured_complete else None),
            "predicted_relative": None, "predicted_slope": None,
            "agrees": None}
  if bound is not None:
    bound = np.asarray(bound, np.float64)
    growth.update(predicted_relative=(bound / bound[0]).tolist(),
                  predicted_slope=loglog_slope(xs, bound))
  if None not in (growth["measured_slope"], growth["predicted_slope"]):
    growth["agrees"] = bool(
        abs(growth["measured_slope"] - growth["predicted_slope"]) <= tolerance)
  return growth


def _check_positive_series(name: str, values: Sequence[float],
                           length: int) -> None:
  """Log-log fits need one positive, finite value per x."""
  array = np.asarray(values, np.float64)
  if array.shape != (length,):
    raise ValueError(
        f"{name} must hold one value per x ({length}), got shape {array.shape}.")
  if not np.all(np.isfinite(array) & (array > 0)):
    raise ValueError(f"{name} must be positive and finite (a log-log fit),"
                     f" got {array.tolist()}.")
