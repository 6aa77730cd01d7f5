"""Rollout-consistency benchmark (issue 4), printed as ratios from one run.

Wall time of one training step (forward, backward, clipped AdamW update) of
the rollout experiment's forecasters on co2 windows (L = 104, batch 64):

1. TF + lambda * L_JVP over plain teacher forcing. Goal: <= 2.0.
2. k-step unrolled training (k = 4, 8) over teacher forcing, and TF + L_JVP
   over unrolling: the penalty should cost a fraction of an unroll.

Each side runs the library's jitted chunk of training steps that
``experiments.rollout`` trains with (:func:`jaxpapers.models.make_train_chunk`,
one run, no vmap over seeds), at the experiment's default sizes.

Run: ``python -m benchmarks.rollout`` (``--tiny``: the MLP alone, of widths
8, L = 16, batch 4, 2 steps per call, k = 2, one round of one repeat).
"""

import functools
from typing import NamedTuple

import jax.numpy as jnp

import benchmarks
from jaxpapers import data
from jaxpapers import models
from jaxpapers import profiling

DATASET = "co2"


class Sizes(NamedTuple):
  models: tuple[str, ...]
  lookback: int
  batch_size: int
  hidden: tuple[int, int]  # MLP widths
  steps_per_call: int  # amortise dispatch: every side runs in one lax.scan
  unroll_ks: tuple[int, ...]
  rounds: int
  repeats: int


# FULL: the defaults of experiments/configs/rollout.py (co2: lookback 104,
# batch 64, MLP 64x64; DLinear's trend kernel 25).
FULL = Sizes(models=("dlinear", "mlp"), lookback=104, batch_size=64,
             hidden=(64, 64), steps_per_call=50, unroll_ks=(4, 8), rounds=5,
             repeats=3)
TINY = Sizes(models=("mlp",), lookback=16, batch_size=4, hidden=(8, 8),
             steps_per_call=2, unroll_ks=(2,), rounds=1, repeats=1)
MOVING_AVERAGE = 25
OPTIMIZER = dict(learning_rate=1e-3, weight_decay=1e-4, clip_norm=1.0)


def _training_chunk(group, model, task, sizes):
  """The library's jitted chunk of training steps and its arguments."""
  tx = models.forecaster_optimizer(**OPTIMIZER)
  graphdef, state, data_keys = models.init_group(group, functools.partial(
      models.make_forecaster, model, task.lookback, task.channels,
      moving_average=MOVING_AVERAGE, hidden=sizes.hidden), tx)
  chunk = models.make_train_chunk(group, graphdef, tx,
                                  batch_size=sizes.batch_size,
                                  num_steps=sizes.steps_per_call)
  windows = tuple(jnp.asarray(x) for x in task.train)
  return chunk, (state, jnp.asarray(group.lams, jnp.float32), data_keys,
                 windows)


def _step_seconds(sides, sizes):
  """Seconds per training step of each side, timed in interleaved rounds.

  On a shared machine, load comes and goes; interleaving the sides and
  keeping each one's best round exposes them to the same conditions.
  """
  best = {name: float("inf") for name in sides}
  for _ in range(sizes.rounds):
    for name, (chunk, args) in sides.items():
      seconds = profiling.time_jitted(chunk, *args, repeats=sizes.repeats)
      best[name] = min(best[name], seconds / sizes.steps_per_call)
  return best


def main(tiny: bool = False):
  sizes = TINY if tiny else FULL
  unroll_ks = sizes.unroll_ks
  task = models.forecast_task(data.load_series(DATASET),
                              lookback=sizes.lookback, horizons=(1,),
                              train_horizon=max(unroll_ks))
  print(f"training step on {DATASET} (L={task.lookback}, batch"
        f" {sizes.batch_size}); ratios over teacher forcing (TF)")
  group = models.ForecasterGroup("penalty", 0, (0.1,), (0,))
  # The experiment's TF runs are lambda = 0 members of the penalty family,
  # which still compute the penalty; plain TF is timed as a one-step
  # unroll, whose loss is exactly the one-step MSE.
  variants = {"tf": group._replace(method="unroll", unroll_k=1),
              "penalty": group}
  variants.update({k: group._replace(method="unroll", unroll_k=k)
                   for k in unroll_ks})
  for model in sizes.models:
    seconds = _step_seconds({name: _training_chunk(g, model, task, sizes)
                             for name, g in variants.items()}, sizes)
    tf = seconds["tf"]
    line = (f"{model:8s} TF {1e6 * tf:6.0f} us | TF + JVP"
            f" {seconds['penalty'] / tf:.2f}x (goal <= 2.0)")
    for k in unroll_ks:
      line += f" | unroll{k} {seconds[k] / tf:.2f}x"
    line += (f" | TF + JVP / unroll{unroll_ks[-1]}:"
             f" {seconds['penalty'] / seconds[unroll_ks[-1]]:.2f}")
    print(line)


if __name__ == "__main__":
  benchmarks.cli(main)
