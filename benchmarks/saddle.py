"""Saddle benchmarks (issue 5), printed as ratios from one run.

1. Cost of the per-player program: one Extragradient step through
   :func:`jaxpapers.saddle.run` (``vmap`` over players, counted exchanges, the
   observer's residual) over one step of a plain global EG loop
   (``z - gamma (A z + c)`` twice), on the d=200 game of the experiment at
   L_xx/L_xy = 100, float64. Goal: <= 2 (the observer alone adds a third
   operator evaluation, 1.5x).
2. Cost of one DM-SP stage over one EG step on the same game; the stage's
   local solves take about sqrt(1 + L_xx / (2 L_xy)) gradients each.

Run: ``python -m benchmarks.saddle`` (``--tiny``: d = 8, 10 EG steps and 2
DM-SP stages, one repeat).
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

import benchmarks
from jaxpapers import profiling
from jaxpapers import saddle


class Sizes(NamedTuple):
  dim: int
  eg_steps: int
  dm_stages: int
  repeats: int


FULL = Sizes(dim=200, eg_steps=2000, dm_stages=200, repeats=7)
TINY = Sizes(dim=8, eg_steps=10, dm_stages=2, repeats=1)


@functools.partial(jax.jit, static_argnames="num_steps")
def _plain_extragradient(rows, offset, z, step_size, num_steps):
  matrix = rows.reshape(offset.size, offset.size)
  c = offset.reshape(-1)

  def body(_, z):
    half = z - step_size * (matrix @ z + c)
    return z - step_size * (matrix @ half + c)

  return jax.lax.fori_loop(0, num_steps, body, z.reshape(-1))


def main(tiny: bool = False):
  sizes = TINY if tiny else FULL
  steps = sizes.eg_steps
  with jax.enable_x64(True):
    game = saddle.random_saddle_game(jax.random.key(0), sizes.dim, l_xx=100.0,
                                     l_xy=1.0, mu=1e-3, dtype=jnp.float64)
    step_size = 1 / float(saddle.lipschitz_bound(game))
    rows, offset = game.player_data
    plain = profiling.time_jitted(_plain_extragradient, rows, offset,
                                  game.zeros(), step_size, steps,
                                  repeats=sizes.repeats) / steps

    def per_player(method, num_steps):
      state = saddle.init(method, game, game.zeros())
      run = lambda s: saddle.run(method, game, s, num_steps=num_steps)
      return profiling.time_jitted(
          run, state, repeats=min(3, sizes.repeats)) / num_steps

    eg = per_player(saddle.extragradient(step_size), steps)
    dm = per_player(saddle.dm_sp(), sizes.dm_stages)
  print(f"EG step, per-player program / plain loop: {eg / plain:.2f}x"
        f" (goal <= 2)  [{1e6 * eg:.0f} us vs {1e6 * plain:.0f} us]")
  print(f"DM-SP stage / EG step (per-player programs): {dm / eg:.1f}x"
        f"  [{1e6 * dm:.0f} us per stage]")


if __name__ == "__main__":
  benchmarks.cli(main)
