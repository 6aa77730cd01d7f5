"""What every experiment config shares: the config argument and field ranges."""

import math
from typing import Any, Callable, Mapping

import numpy as np


SCALES = ("", "smoke", "paper")


def is_smoke(arg: str | None) -> bool:
  """True for the ``:smoke`` argument; False for none or ``:paper``; anything else is an error."""
  if arg not in (None, *SCALES):
    raise ValueError(f"unknown config argument {arg!r}; expected 'smoke',"
                     " 'paper' or none.")
  return arg == "smoke"


def is_paper(arg: str | None) -> bool:
  """True for the ``:paper`` argument: the scale the paper reports.

  Or the largest one accelerator runs in under 15 minutes; the config
  module's docstring gives its expected wall time, and its ``PAPER_FEW_STEPS``
  (dotted field -> value) cut it to a few steps at the same model and data
  size, which a test runs on CPU.
  """
  return not is_smoke(arg) and arg == "paper"


# ------------------------------------------------------------ field ranges --
# Each config module declares ``FIELDS``: every dotted field of its config ->
# the Range its values must lie in. The harness checks the final config
# (after ``--config.FIELD=VALUE`` overrides) against it before any compute
# and before the workdir is touched; a value outside is a usage error naming
# the field, the value and the range. Relations between fields (a multiple
# of another, a subset of the binary's methods) stay in the binary's
# ``validate``.


class Range:
  """The values one config field may take: ``problem(value)`` says why not."""

  def __init__(self, description: str, accepts: Callable[[Any], bool]):
    self.description = description
    self._accepts = accepts

  def problem(self, value: Any) -> str | None:
    """None for a value in range, else what was expected."""
    try:
      ok = self._accepts(value)
    except (TypeError, ValueError):
      ok = False
    return None if ok else f"expected {self.description}"

  def __repr__(self) -> str:
    return f"Range({self.description})"


class _Sequence(Range):
  """A tuple or list whose entries each lie in one Range; names a bad entry."""

  def __init__(self, entry: Range, min_len: int, max_len: int | None,
               increasing: bool):
    length = (f"{min_len}" if max_len == min_len else
              f"{min_len} or more" if max_len is None else
              f"{min_len} to {max_len}")
    super().__init__(
        f"a sequence of {length} entries, each {entry.description}"
        + (", strictly increasing" if increasing else ""),
        lambda value: self.problem(value) is None)
    self.entry, self.min_len, self.max_len = entry, min_len, max_len
    self.increasing = increasing

  def problem(self, value: Any) -> str | None:
    if not isinstance(value, (tuple, list)) or not (
        self.min_len <= len(value) <= (self.max_len or len(value))):
      return f"expected {self.description}"
    for i, item in enumerate(value):
      problem = self.entry.problem(item)
      if problem is not None:
        return f"entry [{i}]={item!r}: {problem}"
    if self.increasing and any(b <= a for a, b in zip(value, value[1:])):
      return f"expected {self.description}"
    return None


def _is_int(value: Any) -> bool:
  return isinstance(value, (int, np.integer)) and not isinstance(
      value, (bool, np.bool_))


def _is_real(value: Any) -> bool:
  return (isinstance(value, (int, float, np.integer, np.floating))
          and not isinstance(value, (bool, np.bool_))
          and math.isfinite(value))


def integer(low: int = 1, high: int | None = None) -> Range:
  """An int in ``[low, high]`` (default: a positive count)."""
  return Range(f"an int in [{low}, {'inf' if high is None else high}]",
               lambda v: _is_int(v) and low <= v and (high is None or v <= high))


def real(low: float = -math.inf, high: float = math.inf, *,
         low_open: bool = False, high_open: bool = False) -> Range:
  """A finite number in the interval (NaN and infinities never are)."""
  left = "(" if low_open or low == -math.inf else "["
  right = ")" if high_open or high == math.inf else "]"
  return Range(
      f"a finite number in {left}{low:g}, {high:g}{right}",
      lambda v: _is_real(v) and (low < v if low_open else low <= v)
      and (v < high if high_open else v <= high))


def one_of(*values: Any) -> Range:
  return Range(f"one of {values!r}", lambda v: v in values)


def sequence(entry: Range, *, min_len: int = 1, max_len: int | None = None,
             increasing: bool = False) -> Range:
  """A tuple/list of ``min_len`` (default: at least one) to ``max_len`` entries."""
  return _Sequence(entry, min_len, max_len, increasing)


COUNT = integer(1)  # steps, sizes, widths, rounds
NONNEGATIVE_INT = integer(0)  # seeds, offsets
SEEDS = sequence(NONNEGATIVE_INT)
POSITIVE = real(0, low_open=True)  # learning rates, scales
NONNEGATIVE = real(0)  # weight decays, noise levels
FRACTION = real(0, 1)  # probabilities, fractions, tolerances
FLAG = Range("True or False", lambda v: isinstance(v, (bool, np.bool_)))
NAME = Range("a non-empty string", lambda v: isinstance(v, str) and bool(v))
NAMES = sequence(NAME)


def check_fields(config: Any, fields: Mapping[str, Range]) -> None:
  """Raises ValueError naming every field of ``config`` outside its Range.

  A field with no declared Range is an error too (a config and its
  ``FIELDS`` must change together), as is a declared field the config lacks.
  """
  values = flatten(config)
  problems = [f"{name}={value!r}: "
              + (fields[name].problem(value) if name in fields else "")
              for name, value in values.items()
              if name in fields and fields[name].problem(value) is not None]
  problems += [f"{name} has no declared range (add it to the config's FIELDS)"
               for name in values if name not in fields]
  problems += [f"{name} is declared in FIELDS but not a field of the config"
               for name in fields if name not in values]
  if problems:
    raise ValueError("; ".join(problems))


def flatten(config: Any, prefix: str = "") -> dict[str, Any]:
  """``{"a.b": value}`` for every leaf of a (nested) ConfigDict or dict."""
  out = {}
  for key, value in config.items():
    if hasattr(value, "items"):
      out.update(flatten(value, f"{prefix}{key}."))
    else:
      out[f"{prefix}{key}"] = value
  return out
