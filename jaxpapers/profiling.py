"""Wall time and compiled memory of jitted calls: the one copy benchmarks and experiments share.

Timings on a shared machine are noisy; compare two functions by
:func:`alternating_seconds` (rounds that time each side in turn, so load
changes hit both) and take ratios per round, never single timings.
"""

import time
from typing import Any, Callable, Mapping, Sequence

import jax
import numpy as np


def time_jitted(fn: Callable[..., Any], *args: Any, repeats: int = 7,
                number: int = 1) -> float:
  """Seconds per call of ``fn(*args)``: compiled first, then the best of ``repeats``.

  Each repeat runs ``number`` back-to-back calls and blocks on the last
  result; the minimum over repeats is the least noisy estimate on a shared
  machine.

  Raises:
    TypeError: ``fn`` is not callable.
    ValueError: ``repeats`` or ``number`` is not an int >= 1.
  """
  if not callable(fn):
    raise TypeError(f"fn must be callable; got {type(fn).__name__}.")
  for name, count in (("repeats", repeats), ("number", number)):
    if not _is_count(count):
      raise ValueError(f"{name} must be an int >= 1; got {count!r}.")
  jax.block_until_ready(fn(*args))
  best = float("inf")
  for _ in range(repeats):
    start = time.perf_counter()
    for _ in range(number):
      out = fn(*args)
    jax.block_until_ready(out)
    best = min(best, (time.perf_counter() - start) / number)
  return best


def call_seconds(fn: Callable[..., Any], *args: Any) -> tuple[Any, float]:
  """``(fn(*args), seconds)``: one call, timed until its result is ready.

  For work that runs once (an epoch, an episode batch, one update of a data
  structure), where :func:`time_jitted`'s warm-up and repeats would redo it.
  The time includes compiling when ``fn`` is not compiled for ``args`` yet:
  call it once before to time the compiled program alone.

  Raises:
    TypeError: ``fn`` is not callable.
  """
  if not callable(fn):
    raise TypeError(f"fn must be callable; got {type(fn).__name__}.")
  start = time.perf_counter()
  out = jax.block_until_ready(fn(*args))
  return out, time.perf_counter() - start


def _is_count(n: Any) -> bool:
  return isinstance(n, int) and not isinstance(n, bool) and n >= 1


def alternating_seconds(
    calls: Mapping[str, tuple[Callable[..., Any], Sequence[Any]]], *,
    rounds: int, repeats: int = 3, number: int = 1,
) -> dict[str, list[float]]:
  """Per-round seconds per call of each ``name: (fn, args)``, timed in turn.

  Every round times every side once (:func:`time_jitted` with ``repeats``
  and ``number``), so the ratio of two sides within a round compares them
  under the same load; ``result[name][i]`` is round ``i``.

  Example::

    secs = alternating_seconds({"a": (f, (x,)), "b": (g, (x,))}, rounds=9)
    ratios = [a / b for a, b in zip(secs["a"], secs["b"])]

  Raises:
    TypeError: an entry of ``calls`` is not ``(callable, args)``.
    ValueError: ``rounds`` (or ``repeats``, ``number``) is not an int >= 1.
  """
  if not _is_count(rounds):
    raise ValueError(f"rounds must be an int >= 1; got {rounds!r}.")
  for name, entry in calls.items():
    if not (isinstance(entry, (tuple, list)) and len(entry) == 2
            and callable(entry[0])):
      raise TypeError(
          f"calls[{name!r}] must be (fn, args) with fn callable; got"
          f" {entry!r}.")
  out = {name: [] for name in calls}
  for _ in range(rounds):
    for name, (fn, args) in calls.items():
      out[name].append(time_jitted(fn, *args, repeats=repeats, number=number))
  return out


def paired_ratio(seconds_a: Sequence[float], seconds_b: Sequence[float]
                 ) -> dict[str, float]:
  """Median and spread of ``a_i / b_i`` over rounds timed alternately.

  Returns ``ratio`` (median of the per-round ratios), ``low`` and ``high``
  (their 10th and 90th percentiles) and ``rounds``.
  Timing ``a`` and ``b`` in alternation exposes both to the same machine
  load, so each round's ratio is far less noisy than either time. The spread
  covers the noise within one run only: a machine under another load can
  shift every round's ratio alike.

  Example::

    secs = alternating_seconds({"a": (f, (x,)), "b": (g, (x,))}, rounds=9)
    paired_ratio(secs["a"], secs["b"])["ratio"]  # how many times slower a is

  Raises:
    ValueError: the two sides have different or no rounds.
  """
  if len(seconds_a) != len(seconds_b) or not len(seconds_a):
    raise ValueError(
        "seconds_a and seconds_b must hold one time per round each, at least"
        f" one; got {len(seconds_a)} and {len(seconds_b)}.")
  ratios = np.asarray(seconds_a, np.float64) / np.asarray(seconds_b, np.float64)
  return {"ratio": float(np.median(ratios)),
          "low": float(np.quantile(ratios, 0.1)),
          "high": float(np.quantile(ratios, 0.9)), "rounds": int(ratios.size)}


def compiled_footprint(compiled: Any) -> dict[str, int]:
  """XLA's compiled memory of a call: arguments + outputs - aliased + temporaries.

  ``compiled`` is ``jax.jit(f).lower(*args).compile()``; ``-1`` entries mean
  the backend gives no memory analysis.

  Raises:
    TypeError: ``compiled`` is not compiled (e.g. ``jax.jit(f)`` itself or
      its ``lower(...)``).
  """
  if not isinstance(compiled, jax.stages.Compiled):
    raise TypeError(
        "compiled must be jax.jit(f).lower(*args).compile(); got"
        f" {type(compiled).__name__}.")
  stats = compiled.memory_analysis()
  if stats is None:
    return {"peak_bytes": -1, "temp_bytes": -1}
  peak = (stats.argument_size_in_bytes + stats.output_size_in_bytes
          - stats.alias_size_in_bytes + stats.temp_size_in_bytes)
  return {"peak_bytes": int(peak), "temp_bytes": int(stats.temp_size_in_bytes)}


class CompiledCache:
  """Ahead-of-time compiled calls and their :func:`compiled_footprint`, one per signature.

  ``cache(fn, *args)`` returns ``(compiled, footprint)``: ``jax.jit(fn)``
  lowered and compiled for the arguments' tree structure, shapes and dtypes,
  compiled once per ``fn`` object and signature (e.g. once for every domain
  of a sequence padded to one shape). ``compiled`` accepts only arguments of
  that signature; the arguments' leaves must be arrays.

  Example:
    >>> cache = CompiledCache()
    >>> double = lambda x: 2 * x
    >>> compiled, footprint = cache(double, jax.numpy.ones(3))
    >>> compiled(jax.numpy.ones(3)).tolist(), sorted(footprint)
    ([2.0, 2.0, 2.0], ['peak_bytes', 'temp_bytes'])
    >>> cache(double, jax.numpy.zeros(3))[0] is compiled, len(cache)
    (True, 1)
  """

  def __init__(self):
    self._compiled = {}

  def __call__(self, fn: Callable[..., Any], *args: Any
               ) -> tuple[Any, dict[str, int]]:
    leaves = jax.tree.leaves(args)
    for leaf in leaves:
      if not hasattr(leaf, "shape") or not hasattr(leaf, "dtype"):
        raise TypeError(
            "CompiledCache: every leaf of args must be an array (a shape and"
            f" dtype for the signature); got {type(leaf).__name__}.")
    signature = (fn, jax.tree.structure(args),
                 tuple((x.shape, x.dtype) for x in leaves))
    if signature not in self._compiled:
      compiled = jax.jit(fn).lower(*args).compile()
      self._compiled[signature] = compiled, compiled_footprint(compiled)
    return self._compiled[signature]

  def __len__(self) -> int:
    return len(self._compiled)
