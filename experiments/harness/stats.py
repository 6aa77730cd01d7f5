"""Summaries over seeds and timing comparisons: the one copy every binary uses."""

import datetime
import math
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from jaxpapers.profiling import paired_ratio  # the harness's timing summary too


def mean_se(values: Iterable[float | None]) -> tuple[float | None, float | None]:
  """Mean and standard error (``std(ddof=1) / sqrt(n)``) of the non-None values.

  ``(None, None)`` for no values; the standard error is None for one value.
  """
  array = np.asarray([v for v in values if v is not None], np.float64)
  if array.size == 0:
    return None, None
  se = (float(array.std(ddof=1) / np.sqrt(array.size)) if array.size > 1
        else None)
  return float(array.mean()), se


def mean_se_curve(curves: Sequence[Sequence[float]]
                  ) -> tuple[list[float], list[float] | None]:
  """Pointwise mean and standard error of equally long curves (one per seed)."""
  array = np.asarray(curves, np.float64)
  se = (array.std(0, ddof=1) / np.sqrt(len(array))).tolist() \
      if len(array) > 1 else None
  return array.mean(0).tolist(), se


def over_seeds(per_seed: Sequence[Mapping[str, Any]],
               keys: Iterable[str] | None = None) -> dict[str, Any]:
  """One summary from per-seed summaries: ``key`` (mean) and ``key + "_se"``.

  ``keys`` (default: every numeric field) are averaged; booleans become
  "any seed" (e.g. ``diverged``) unless named in ``keys``; every other field
  is taken from the first seed (the run's description).
  """
  out = dict(per_seed[0])
  numeric = [k for k, v in per_seed[0].items()
             if isinstance(v, (int, float)) and not isinstance(v, bool)]
  for key in (numeric if keys is None else keys):
    out[key], out[key + "_se"] = mean_se([s[key] for s in per_seed])
  for key, value in per_seed[0].items():
    if isinstance(value, bool):
      out[key] = any(s[key] for s in per_seed)
  return out


def at_most(ratio: Mapping[str, float], bound: float) -> bool | None:
  """``ratio <= bound``: True/False when the whole spread agrees, else None.

  None means inconclusive: the bound lies inside the measured spread, so
  machine noise alone could flip the verdict.
  """
  if ratio["high"] <= bound:
    return True
  if ratio["low"] > bound:
    return False
  return None


def at_least(ratio: Mapping[str, float], bound: float) -> bool | None:
  """``ratio >= bound``: True/False when the whole spread agrees, else None.

  The mirror of :func:`at_most`: None (inconclusive) when the bound lies
  inside the measured spread.
  """
  if ratio["low"] >= bound:
    return True
  if ratio["high"] < bound:
    return False
  return None


# A difference must clear this many standard errors to count either way.
EFFECT_STANDARD_ERRORS = 2.0


def effect_verdict(effect: float, se: float | None) -> bool | None:
  """The verdict on a claimed effect measured as ``effect`` +- ``se``.

  ``effect`` is signed so that positive is the claimed direction (a gain, a
  reduction written as ``before - after``). True (PASS) when it exceeds
  ``EFFECT_STANDARD_ERRORS`` standard errors, False (FAIL) when it is at most
  minus that many, None (INCONCLUSIVE) in between. With no spread (``se`` 0,
  or None for one seed) the sign decides, and an exact zero is a FAIL: the
  effect was measured and is absent.
  """
  margin = EFFECT_STANDARD_ERRORS * (se or 0.0)
  if effect > margin:
    return True
  if effect <= -margin:
    return False
  return None


def paired_difference(ours: Sequence[float], theirs: Sequence[float]
                      ) -> tuple[float | None, float | None]:
  """Mean and s.e. of the per-seed differences ``ours_i - theirs_i``."""
  if len(ours) != len(theirs):
    raise ValueError(f"paired values need one per seed on both sides; got"
                     f" {len(ours)} and {len(theirs)}")
  return mean_se(np.asarray(ours, np.float64) - np.asarray(theirs, np.float64))


def duration(seconds: float) -> str:
  """``H:MM:SS`` of a number of seconds; "?" for an unknown (non-finite) one."""
  if not math.isfinite(seconds):
    return "?"
  return str(datetime.timedelta(seconds=round(seconds)))
