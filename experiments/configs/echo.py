r"""ECHO at CPU scale: GRPO vs GRPO + environment cross-entropy on a toy shell.

Default (designed for <= 10 min on 2 idle CPU cores; measured 909 s on 2
cores shared with other jobs at load average ~11)::

  python -m experiments.echo --config experiments/configs/echo.py

Smoke test (under a minute on idle cores; 100 s measured at load ~11)::

  python -m experiments.echo --config experiments/configs/echo.py:smoke

Our reconstruction of the protocol (``docs/echo.md``): the key-value shell of
:mod:`jaxpapers.rl._shell` (4 turns, tasks of 2-4 commands), a byte GPT warm
started on random-command transcripts, then GRPO (groups of 8) with
lambda in {0, 0.005, 0.05} and lambda = 0.05 with ``world_model_only``, 3 seeds,
all 12 runs vmapped in one step. **Smaller than the paper's CPU protocol to fit
the budget**: d = 64 (not 128), 4 tasks per step (not 8), 60 RL steps (not
300) with a 10-step warm-up (not 20), one warm-start model shared by the
seeds, format warnings off (the observation slot is then 22 tokens, not 36).

Paper scale (the paper's CPU protocol, ``/work/shared/papers/echo.md``; its
TerminalBench runs of Qwen3-8B/14B are out of reach)::

  python -m experiments.echo --config experiments/configs/echo.py:paper

d = 128 (2 layers, d_ff = 512: 0.46M parameters, where the spec says "about
1M"), 8 tasks x 8 samples per step, 300 RL steps after a 20-step warm-up,
format warnings on, evaluation with 8 samples per held-out task at
temperature 0.6 (the paper's), 3 seeds, all 12 runs vmapped; a 1,000-step
warm start (the spec gives none; ours). Expected wall time on one H100:
about 5 minutes. This is an estimate, not a measurement (no GPU was lent to
this task): a step is one batched ``lax.scan`` rollout of 225 tokens with a
KV cache for 12 x 64 transcripts plus one forward/backward pass, about
0.1-0.3 s on a GPU for a model this small, so 300 steps and 31 evaluations
take 1-2 min, plus compilation and the warm start. ``PAPER_FEW_STEPS`` keeps
the model, the tasks and the rollout sizes and cuts to one seed, two
variants, 2 warm-start and 2 RL steps and a small evaluation. Measured: 404 s on 2 CPU cores shared at load
average ~24 (mostly XLA compilation; far from the 30 s aim on such a machine).
"""

import ml_collections

from experiments.configs import common

VARIANTS = ("grpo", "echo_0.005", "echo_0.05", "world_model_only")


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """The config; ``arg="smoke"``: a sub-minute run; ``"paper"``: the paper's CPU protocol."""
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.seeds = (0, 1, 2)
  config.variants = VARIANTS

  config.env = ml_collections.ConfigDict()
  config.env.num_turns = 4
  config.env.command_len = 12
  config.env.format_warnings = False
  config.env.min_commands = 2
  config.env.max_commands = 4
  config.env.num_train_tasks = 2000
  config.env.num_held_out = 64

  config.model = ml_collections.ConfigDict()
  config.model.d_model = 64
  config.model.num_heads = 4
  config.model.num_layers = 2
  config.model.d_ff = 256

  config.warm_start = ml_collections.ConfigDict()
  config.warm_start.steps = 300
  config.warm_start.batch_size = 32
  config.warm_start.learning_rate = 1e-3

  config.rl = ml_collections.ConfigDict()
  config.rl.steps = 60
  config.rl.tasks_per_step = 4
  config.rl.group_size = 8
  config.rl.temperature = 0.8
  config.rl.learning_rate = 3e-4
  config.rl.warmup_steps = 10
  config.rl.clip_norm = 0.2
  config.rl.weight_decay = 0.01
  config.rl.mask_mode = "env_only"
  config.rl.lambda_schedule = "constant"

  config.eval = ml_collections.ConfigDict()
  config.eval.every = 10
  config.eval.temperature = 0.6
  config.eval.samples = 1
  config.eval.probe_size = 64
  # "Final" values: the mean of the last this-many evaluations of a run.
  config.eval.final_points = 2

  if common.is_smoke(arg):
    config.seeds = (0,)
    config.variants = ("grpo", "echo_0.05", "world_model_only")
    config.env.num_train_tasks = 200
    config.env.num_held_out = 16
    config.model.d_model = 32
    config.model.d_ff = 64
    config.warm_start.steps = 20
    config.warm_start.batch_size = 16
    config.rl.steps = 4
    config.rl.tasks_per_step = 2
    config.rl.group_size = 4
    config.rl.warmup_steps = 2
    config.eval.every = 2
    config.eval.probe_size = 16
    config.eval.final_points = 1
  elif common.is_paper(arg):
    config.env.format_warnings = True
    config.model.d_model = 128
    config.model.d_ff = 512
    config.warm_start.steps = 1000
    config.rl.steps = 300
    config.rl.tasks_per_step = 8
    config.rl.warmup_steps = 20
    config.eval.samples = 8
  return config


PAPER_FEW_STEPS = {"seeds": (0,), "variants": ("grpo", "echo_0.05"),
                   "warm_start.steps": 2, "rl.steps": 2, "rl.warmup_steps": 1,
                   "eval.every": 2, "eval.samples": 1, "eval.probe_size": 8,
                   "eval.final_points": 1}


FIELDS = {
    "seed": common.NONNEGATIVE_INT,
    "seeds": common.SEEDS,
    "variants": common.NAMES,
    "env.command_len": common.COUNT,
    "env.format_warnings": common.FLAG,
    "env.min_commands": common.COUNT,
    "env.max_commands": common.COUNT,
    "env.num_held_out": common.COUNT,
    "env.num_train_tasks": common.COUNT,
    "env.num_turns": common.COUNT,
    "eval.every": common.COUNT,
    "eval.final_points": common.COUNT,
    "eval.probe_size": common.COUNT,
    "eval.samples": common.COUNT,
    "eval.temperature": common.POSITIVE,
    "model.d_ff": common.COUNT,
    "model.d_model": common.COUNT,
    "model.num_heads": common.COUNT,
    "model.num_layers": common.COUNT,
    "rl.clip_norm": common.POSITIVE,
    "rl.group_size": common.integer(2),
    "rl.lambda_schedule": common.one_of("constant", "linear_decay",
                                        "step_decay"),
    "rl.learning_rate": common.POSITIVE,
    "rl.mask_mode": common.one_of("env_only", "full_observation",
                                  "warning_only", "warning_plus_env"),
    "rl.steps": common.COUNT,
    "rl.tasks_per_step": common.COUNT,
    "rl.temperature": common.POSITIVE,
    "rl.warmup_steps": common.NONNEGATIVE_INT,
    "rl.weight_decay": common.NONNEGATIVE,
    "warm_start.batch_size": common.COUNT,
    "warm_start.learning_rate": common.POSITIVE,
    "warm_start.steps": common.NONNEGATIVE_INT,
}


def validate(config: ml_collections.ConfigDict) -> None:
  """Known variants, evaluations on the last step, a feasible task length."""
  unknown = set(config.variants) - set(VARIANTS)
  if unknown:
    raise ValueError(f"variants {sorted(unknown)} unknown; known are"
                     f" {sorted(VARIANTS)}.")
  if config.rl.steps % config.eval.every:
    raise ValueError(f"rl.steps={config.rl.steps} must be a multiple of"
                     f" eval.every={config.eval.every}.")
  env = config.env
  if not env.min_commands <= env.max_commands <= env.num_turns:
    raise ValueError(
        "env needs min_commands <= max_commands <= num_turns; got"
        f" {env.min_commands}, {env.max_commands}, {env.num_turns}.")
