"""Query-selection benchmark (BUTR issue), printed as ratios from one run.

Time to select the decoder queries of a batch: BUTR's budgeter (confidence
count, K(x), top-K_max with a validity mask; :func:`jaxpapers.detection.
select_queries` under ``vmap``) against the fixed-K top-k it replaces
(``jax.lax.top_k`` with K = 900), timed in alternating rounds (median
per-round ratio and its 10-90% spread). Two sizes: the blob experiment's
1024 tokens, and 13,343 tokens (a 5-scale pyramid of an 800 x 800 image at
strides 8-128, DINO's two-stage setting), batch 4 and 16. Goal: <= 1.2x
(the budget is a sum and a clip; the top-k dominates).

Run: ``python -m benchmarks.detection`` (``--tiny``: 1024 tokens, batch 2,
2 rounds of one call).
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

import benchmarks
from jaxpapers import detection
from jaxpapers import profiling

FIXED_K = 900


class Sizes(NamedTuple):
  tokens: dict[str, int]  # each >= FIXED_K
  batches: tuple[int, ...]
  rounds: int
  repeats: int
  number: int  # calls per timing


FULL = Sizes(tokens={"blob experiment": 1024, "5-scale 800x800": 100**2
                     + 50**2 + 25**2 + 13**2 + 7**2},
             batches=(4, 16), rounds=15, repeats=3, number=20)
TINY = Sizes(tokens={"blob experiment": 1024}, batches=(2,), rounds=2,
             repeats=1, number=1)


@functools.partial(jax.jit, static_argnames=("budgeter",))
def _budgeted(scores_BxN, budgeter):
  return jax.vmap(functools.partial(detection.select_queries, budgeter))(
      scores_BxN)


@jax.jit
def _fixed(scores_BxN):
  return jax.lax.top_k(scores_BxN, FIXED_K)


def main(tiny: bool = False):
  sizes = TINY if tiny else FULL
  budgeter = detection.butr()
  for name, num_tokens in sizes.tokens.items():
    for batch in sizes.batches:
      scores = jax.random.uniform(jax.random.key(0), (batch, num_tokens))
      # About 60 confident tokens per image (a sparse tiny-object image).
      scores = jnp.where(scores > 1 - 60 / num_tokens, scores, scores * 0.2)
      seconds = profiling.alternating_seconds(
          {"butr": (lambda s: _budgeted(s, budgeter), (scores,)),
           "fixed": (_fixed, (scores,))}, rounds=sizes.rounds,
          repeats=sizes.repeats, number=sizes.number)
      ratio = profiling.paired_ratio(seconds["butr"], seconds["fixed"])
      mean_k = float(_budgeted(scores, budgeter).budget.mean())
      print(f"{name:16s} N={num_tokens:5d} B={batch:2d}: BUTR / fixed-K top-k"
            f" {ratio['ratio']:.2f}x (spread {ratio['low']:.2f}-"
            f"{ratio['high']:.2f}), {1e6 * min(seconds['butr']):.0f} us vs"
            f" {1e6 * min(seconds['fixed']):.0f} us per batch, mean K"
            f" {mean_k:.0f}")


if __name__ == "__main__":
  benchmarks.cli(main)
