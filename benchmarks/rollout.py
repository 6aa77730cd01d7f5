"""Rollout-consistency benchmark (issue 4), printed as ratios from one run.

Wall time of one training step (forward, backward, clipped AdamW update) of
the rollout experiment's forecasters on co2 windows (L = 104, batch 64):

1. TF + lambda * L_JVP over plain teacher forcing. Goal: <= 2.0.
2. k-step unrolled training (k = 4, 8) over teacher forcing, and TF + L_JVP
   over unrolling: the penalty should cost a fraction of an unroll.

Each side runs the experiment's own jitted chunk of training steps (one run,
no vmap over seeds), so the numbers are those of ``experiments.rollout``.

Run: ``python -m benchmarks.rollout``.
"""

import jax.numpy as jnp

from jaxpapers import profiling
from experiments import rollout
from experiments.configs import rollout as rollout_config

DATASET = "co2"
STEPS_PER_CALL = 50  # amortise dispatch: every side runs in one lax.scan
UNROLL_KS = (4, 8)
ROUNDS = 5


def _training_chunk(group, task, config):
  """The experiment's jitted chunk of training steps and its arguments."""
  graphdef, state, data_keys = rollout.init_group(group, task, config)
  chunk = rollout.make_train_chunk(group, graphdef, config)
  windows = tuple(jnp.asarray(x) for x in task.train)
  return chunk, (state, jnp.asarray(group.lams, jnp.float32), data_keys,
                 windows)


def _step_seconds(sides):
  """Seconds per training step of each side, timed in interleaved rounds.

  On a shared machine, load comes and goes; interleaving the sides and
  keeping each one's best round exposes them to the same conditions.
  """
  best = {name: float("inf") for name in sides}
  for _ in range(ROUNDS):
    for name, (chunk, args) in sides.items():
      seconds = profiling.time_jitted(chunk, *args, repeats=3)
      best[name] = min(best[name], seconds / STEPS_PER_CALL)
  return best


def main():
  config = rollout_config.get_config()
  config.log_every = STEPS_PER_CALL
  config.unroll_ks = UNROLL_KS
  task = rollout.load_task(DATASET, config)
  print(f"training step on {DATASET} (L={task.lookback}, batch"
        f" {config.train.batch_size}); ratios over teacher forcing (TF)")
  for model in config.models:
    group = rollout.Group("bench", DATASET, model, "penalty", 0, (0.1,), (0,))
    # The experiment's TF runs are lambda = 0 members of the penalty family,
    # which still compute the penalty; plain TF is timed as a one-step
    # unroll, whose loss is exactly the one-step MSE.
    variants = {"tf": group._replace(method="unroll", unroll_k=1),
                "penalty": group}
    variants.update({k: group._replace(method="unroll", unroll_k=k)
                     for k in UNROLL_KS})
    seconds = _step_seconds({name: _training_chunk(g, task, config)
                             for name, g in variants.items()})
    tf = seconds["tf"]
    line = (f"{model:8s} TF {1e6 * tf:6.0f} us | TF + JVP"
            f" {seconds['penalty'] / tf:.2f}x (goal <= 2.0)")
    for k in UNROLL_KS:
      line += f" | unroll{k} {seconds[k] / tf:.2f}x"
    line += (f" | TF + JVP / unroll{UNROLL_KS[-1]}:"
             f" {seconds['penalty'] / seconds[UNROLL_KS[-1]]:.2f}")
    print(line)


if __name__ == "__main__":
  main()
