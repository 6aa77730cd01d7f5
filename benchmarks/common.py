"""Shared timing for benchmarks: best-of-repeats wall time of a jitted call."""

import time
from typing import Any, Callable

import jax


def time_jitted(fn: Callable[..., Any], *args: Any, repeats: int = 7,
                number: int = 1) -> float:
  """Seconds per call of ``fn(*args)``: compiled first, then the best of ``repeats``.

  Each repeat runs ``number`` back-to-back calls and blocks on the last
  result; the minimum over repeats is the least noisy estimate on a shared
  machine.
  """
  jax.block_until_ready(fn(*args))
  best = float("inf")
  for _ in range(repeats):
    start = time.perf_counter()
    for _ in range(number):
      out = fn(*args)
    jax.block_until_ready(out)
    best = min(best, (time.perf_counter() - start) / number)
  return best
