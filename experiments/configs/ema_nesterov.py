r"""EMA-Nesterov on a tiny byte-level LM trained on Python's own text.

Default (about 8 min on 2 idle CPU cores)::

  python -m experiments.ema_nesterov --config experiments/configs/ema_nesterov.py

Smoke test (under a minute)::

  python -m experiments.ema_nesterov --config experiments/configs/ema_nesterov.py:smoke

Our CPU-scale version of the paper's LM pre-training comparison (the
protocol is ours; see ``docs/ema_nesterov.md``): a 2-layer, width-64
decoder-only transformer (the shared ``jaxpapers.models.Transformer``:
learned positions, not RoPE), context 64, batch 16, 800 steps of a
warmup-stable-decay schedule (5% warm-up, linear decay over the last 30%).
EMA-Nesterov follows the authors' recipes (github.com/OptimAI-Lab/
ema-nesterov) scaled to the run: beta tied to lr(t)/lr_peak, on from 20% to
90% of training. Phase 1: a beta x gamma grid on AdamW with one seed
(``grid_seed``, not reused later). Phase 2: AdamW and Muon with and without
the best cell, optax.lookahead(AdamW) and schedule-free AdamW, each with
``seeds``.

Paper scale (``:paper``)::

  python -m experiments.ema_nesterov --config experiments/configs/ema_nesterov.py:paper

The paper's smallest LM runs (the authors' LLaMA-60M on C4, 2,500 steps of
sequences of 256) need about 5e13 FLOPs a step, far past 15 minutes for the
protocol's 28 runs on one GPU. ``:paper`` keeps that recipe's schedule
(2,500 steps, 10% warm-up, decay over the last 10%, EMA-Nesterov on from
30% to 80% of training) and context (256), on all of Python's own text
(pydoc topics and all 630 standard-library files of CPython 3.13, 12 MB),
with the largest transformer we estimate fits the budget: 4 layers, width
256, 4 heads, FFN 1024 (3.2M parameters), batch 32 x 256 bytes, 512
validation windows, the same grid and 3 seeds. Expected wall time on one
H100: about 12 minutes, an estimate (no GPU was lent to measure it): about
2e11 FLOPs a step in 5-8 ms (launch-bound at this width, Muon's
Newton-Schulz included), so 2,500 steps and 50 validations take about 20 s
a run; 28 runs (10 in the grid, 18 in phase 2) take about 10 minutes, plus
about 2 minutes of compilation (one chunk per method). ``PAPER_FEW_STEPS``
keeps the model and data and runs 2 steps of one seed (batch 2, 4
validation windows) on a one-cell grid: eight runs, 37 s on 2 idle CPU
cores, half of it compiling one chunk per method.
"""

import ml_collections

from experiments.configs import common


# The paper config at its model and data sizes: 2 steps of one seed, a one-cell grid.
PAPER_FEW_STEPS = {"seeds": (1,), "num_steps": 2, "eval_every": 2, "checkpoint_every": 2,
                   "batch_size": 2, "ema.betas": (0.5,), "ema.gammas": (0.99,),
                   "data.valid_windows": 4}


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """Returns the config; ``arg="smoke"`` gives a sub-minute run, ``"paper"``
  a 4-layer, width-256 model for 2,500 steps on all of Python's own text."""
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.grid_seed = 0
  config.seeds = (1, 2, 3)

  config.data = ml_collections.ConfigDict()
  config.data.source_files = 200  # stdlib files after the pydoc topics
  config.data.valid_fraction = 0.1
  config.data.split_seed = 0
  config.data.valid_windows = 256

  config.model = ml_collections.ConfigDict()
  config.model.d_model = 64
  config.model.num_heads = 4
  config.model.num_layers = 2
  config.model.d_ff = 256
  config.model.length = 64  # context

  config.batch_size = 16
  config.num_steps = 800
  config.warmup_fraction = 0.05
  config.decay_fraction = 0.3
  config.eval_every = 50
  config.checkpoint_every = 200

  config.adamw = ml_collections.ConfigDict()
  config.adamw.learning_rate = 3e-3
  config.adamw.b1 = 0.9
  config.adamw.b2 = 0.95

  config.muon = ml_collections.ConfigDict()
  config.muon.learning_rate = 0.02  # optax's width scaling; embeddings use AdamW
  config.muon.beta = 0.95

  config.lookahead = ml_collections.ConfigDict()
  config.lookahead.sync_period = 8
  config.lookahead.slow_step_size = 0.5

  config.ema = ml_collections.ConfigDict()
  config.ema.betas = (0.3, 0.5, 0.7)
  config.ema.gammas = (0.0, 0.9, 0.99)
  config.ema.on_fraction = 0.2  # lookahead switched on here ...
  config.ema.rest_fraction = 0.9  # ... and off here
  config.ema.m_init = "first_increment"

  if common.is_smoke(arg):
    config.seeds = (1,)
    config.data.source_files = 10
    config.data.valid_windows = 32
    config.model.d_model = 32
    config.model.num_heads = 2
    config.model.num_layers = 1
    config.model.d_ff = 64
    config.model.length = 32
    config.batch_size = 8
    config.num_steps = 40
    config.eval_every = 10
    config.checkpoint_every = 20
    config.ema.betas = (0.5,)
    config.ema.gammas = (0.0, 0.9)
  if common.is_paper(arg):
    config.data.source_files = 630  # all of CPython 3.13's (no tests)
    config.data.valid_windows = 512
    config.model.d_model = 256
    config.model.num_layers = 4
    config.model.d_ff = 1024
    config.model.length = 256
    config.batch_size = 32
    config.num_steps = 2500  # the authors' LLaMA recipe: 250 warm-up, 250 decay steps
    config.warmup_fraction = 0.1
    config.decay_fraction = 0.1
    config.checkpoint_every = 500
    config.ema.on_fraction = 0.3  # warmup_step 750 ...
    config.ema.rest_fraction = 0.8  # ... rest the last 500 steps
  return config


FIELDS = {
    "seed": common.NONNEGATIVE_INT,
    "seeds": common.SEEDS,
    "grid_seed": common.NONNEGATIVE_INT,
    "data.source_files": common.COUNT,
    "data.split_seed": common.NONNEGATIVE_INT,
    "data.valid_fraction": common.real(0, 1, low_open=True, high_open=True),
    "data.valid_windows": common.COUNT,
    "model.d_ff": common.COUNT,
    "model.d_model": common.COUNT,
    "model.length": common.COUNT,
    "model.num_heads": common.COUNT,
    "model.num_layers": common.COUNT,
    "batch_size": common.COUNT,
    "num_steps": common.COUNT,
    "eval_every": common.COUNT,
    "checkpoint_every": common.COUNT,
    "warmup_fraction": common.real(0, 1, high_open=True),
    "decay_fraction": common.FRACTION,
    "adamw.learning_rate": common.POSITIVE,
    "adamw.b1": common.real(0, 1, high_open=True),
    "adamw.b2": common.real(0, 1, high_open=True),
    "muon.learning_rate": common.POSITIVE,
    "muon.beta": common.real(0, 1, high_open=True),
    "lookahead.slow_step_size": common.real(0, 1, low_open=True),
    "lookahead.sync_period": common.COUNT,
    "ema.betas": common.sequence(common.real(0, 1, high_open=True)),
    "ema.gammas": common.sequence(common.real(0, 1, high_open=True)),
    "ema.m_init": common.one_of("first_increment", "zeros"),
    "ema.on_fraction": common.FRACTION,
    "ema.rest_fraction": common.FRACTION,
}


def validate(config: ml_collections.ConfigDict) -> None:
  """Evaluations fall on checkpoints and the end; validation fills batches."""
  for field in ("num_steps", "checkpoint_every"):
    if config[field] % config.eval_every:
      raise ValueError(f"{field}={config[field]} must be a multiple of"
                       f" eval_every={config.eval_every}.")
  if config.data.valid_windows % config.batch_size:
    raise ValueError(f"data.valid_windows={config.data.valid_windows} must be"
                     f" a multiple of batch_size={config.batch_size}.")
