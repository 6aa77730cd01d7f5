"""DAF fusion cost against one training epoch of an adapter (issue 19), as ratios.

On the DAF experiment's shapes (one digits task: 256 padded rows of 256-d
backbone features, a rank-16 adapter, 10-class cosine head, batch 16), times
in alternating rounds (``profiling.alternating_seconds``, best of 3 per
round, 9 rounds):

1. one epoch of adapter training (``train_task`` with ``epochs=1``, the
   baseline);
2. the closed-form fusion alone (``fuse``, ``two_coef`` and ``per_layer``);
3. the whole fusion step: the adapter's diagonal Fisher on the task's rows
   plus ``update`` (what DAF adds per task on top of training).

Goals: the closed-form fusion costs less than one training epoch (ratio
< 1); the whole fusion step adds less than a quarter of a task's training
(15 epochs in the experiment).
Run: ``python -m benchmarks.continual`` (``--tiny``: 32 rows of 16-d
features, a rank-2 adapter, 4 classes, 2 rounds of one repeat).
"""

import functools
from typing import NamedTuple

import jax
import numpy as np

import benchmarks
from jaxpapers import continual
from jaxpapers import profiling

EPOCHS_PER_TASK = 15


class Sizes(NamedTuple):
  rows: int  # a multiple of TaskTraining's batch size, 16
  features: int
  rank: int
  classes: int  # >= 4: the task's labels are 2 and 3
  rounds: int
  repeats: int


FULL = Sizes(rows=256, features=256, rank=16, classes=10, rounds=9, repeats=3)
TINY = Sizes(rows=32, features=16, rank=2, classes=4, rounds=2, repeats=1)


def main(tiny: bool = False):
  sizes = TINY if tiny else FULL
  rng = np.random.default_rng(0)
  x = jax.numpy.asarray(rng.normal(size=(sizes.rows, sizes.features)),
                        jax.numpy.float32)
  labels = jax.numpy.asarray(rng.integers(2, 4, sizes.rows), jax.numpy.int32)
  weights = jax.numpy.ones(sizes.rows, jax.numpy.float32)
  graphs, params = continual.init_learner(jax.random.key(0), sizes.features,
                                          sizes.rank, sizes.classes)
  one_epoch = functools.partial(
      continual.train_task, graphs, num_seen=4, num_frozen=2,
      training=continual.TaskTraining(epochs=1))
  trained = one_epoch(params, x, labels, weights, jax.random.key(1))
  fisher = continual.adapter_fisher(graphs, trained, x, labels, weights, 4)
  state = continual.init(params["adapter"])
  state, _ = continual.update(state, trained["adapter"], fisher)

  def fuse_with(config):
    return jax.jit(lambda s, a, h: continual.fuse(
        s.theta0, s.global_params, a, s.h_old, h, 2, config))

  @jax.jit
  def fusion_step(state, trained):
    h_new = continual.adapter_fisher(graphs, trained, x, labels, weights, 4)
    return continual.update(state, trained["adapter"], h_new)

  calls = {
      "train_epoch": (one_epoch, (params, x, labels, weights,
                                  jax.random.key(2))),
      "fuse_two_coef": (fuse_with(continual.FusionConfig()),
                        (state, trained["adapter"], fisher)),
      "fuse_per_layer": (fuse_with(continual.FusionConfig(per_layer=True)),
                         (state, trained["adapter"], fisher)),
      "fisher_and_update": (fusion_step, (state, trained)),
  }
  seconds = profiling.alternating_seconds(calls, rounds=sizes.rounds,
                                          repeats=sizes.repeats)
  for name, values in seconds.items():
    print(f"{name:18s} {1e3 * np.median(values):9.3f} ms (median of rounds)")
  base = np.asarray(seconds["train_epoch"])
  for name in ("fuse_two_coef", "fuse_per_layer", "fisher_and_update"):
    ratios = np.asarray(seconds[name]) / base
    goal = "" if name == "fisher_and_update" else "; goal < 1"
    print(f"{name} / train_epoch: {np.median(ratios):.4f}x (10-90%"
          f" {np.quantile(ratios, 0.1):.4f}-{np.quantile(ratios, 0.9):.4f}"
          f"{goal})")
  step = np.median(np.asarray(seconds["fisher_and_update"]) / base)
  print(f"fusion step / one task's training ({EPOCHS_PER_TASK} epochs):"
        f" {step / EPOCHS_PER_TASK:.4f}x (goal < 0.25)")


if __name__ == "__main__":
  benchmarks.cli(main)
