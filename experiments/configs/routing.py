r"""Routing at CPU scale: heavy-decoder depth vs width at matched parameters, on TSP10.

Default (about 8 min on 2 idle CPU cores)::

  python -m experiments.routing --config experiments/configs/routing.py

Smoke test (under a minute)::

  python -m experiments.routing --config experiments/configs/routing.py:smoke

The whole grid of the spec, with the largest configurations (D64xL8,
D128xL2) and the scaled-down LEHD baseline (1 encoder + 6 decoder layers),
20 epochs of the 50k instances (hours on 2 cores; opt-in)::

  python -m experiments.routing --config experiments/configs/routing.py:full

Paper scale (``:paper``): the paper trains 12 decoders of 1M-150M parameters
on 1M TSP100 instances for 150 epochs, far beyond one accelerator in 15
minutes; ``:paper`` is the spec's whole CPU-scale grid (the ``full`` models,
LEHD baseline, 20 epochs of the 50k TSP10 instances) with 3 seeds instead
of 2 (the default's INCONCLUSIVE check is seed-limited; the seeds study,
experiments/results/routing/scaling_seeds/, suggests about 12 seeds for it,
beyond the 15 minutes)::

  python -m experiments.routing --config experiments/configs/routing.py:paper

Expected wall time on one H100: about 12 minutes, an estimate (no
accelerator was lent to measure it). At these widths (48-128, 10 cities,
batch 256) a training step is bound by kernel latency, not FLOPs: 8 models x
3 seeds x 3900 steps at about 3 ms a step (our guess for a 2-8 layer
decoder's forward and backward) is about 5 minutes, plus 240 greedy
evaluations, 8 compilations of about 20 s and Held-Karp labels of 51k
instances on the host (about 1 minute). ``PAPER_FEW_STEPS`` cuts it to 2
steps, one seed, 100 test instances and the largest pair (D64xL8 against
D128xL2) and LEHD, with the same training set: 39 s on 2 idle CPU cores,
mostly the 3 models' compilations and the 50k labels.

TSP10 with exact Held-Karp labels; ``--config.num_cities=20`` labels with
LKH-3 instead (needs ``elkai``). Decoder-only models (head width 16, ReZero,
no normalisation), the depth series at D = 64 and the width series at L = 2;
each depth model is matched with the width model of about its parameter
count (``matched_pairs``): D64xL1 (58k parameters) with D48xL2 (61k), where
the width series' model is the deeper one, and D64xL4 (207k) with D96xL2
(242k). Adam 1e-3 x0.97 per epoch, batch 256, 2 seeds;
the default trains 600 steps (154k partial paths, about 3 epochs).
"""

import ml_collections

from experiments.configs import common
from jaxpapers import routing


PAPER_FEW_STEPS = {"seeds": (0,), "block_steps": 1, "eval_blocks": (1, 2),
                   "num_test": 100, "depth_layers": (8,), "width_widths": (128,),
                   "matched_pairs": (("D64xL8", "D128xL2"),)}


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """Returns the config; ``"smoke"`` runs in under a minute, ``"full"`` is the
  opt-in grid, ``"paper"`` that grid with 3 seeds."""
  paper = common.is_paper(None if arg == "full" else arg)
  full = arg == "full" or paper
  smoke = common.is_smoke(None if full else arg)
  config = ml_collections.ConfigDict()
  config.seeds = (0, 1)
  config.num_cities = 10
  config.num_train = 50_000
  config.num_test = 1000
  config.data_seed = 0

  # Depth series (width fixed) and width series (depth fixed); D x L each.
  config.depth_width = 64
  config.depth_layers = (1, 2, 4)
  config.width_layers = 2
  config.width_widths = (48, 64, 96)
  # Models of about equal parameter counts; the claim's checks compare the
  # deeper (and narrower) one of each pair with the wider (and shallower).
  config.matched_pairs = (("D64xL1", "D48xL2"), ("D64xL4", "D96xL2"))
  config.head_width = 16
  config.lehd_baseline = False  # + "LEHD": 1 encoder layer, 6 decoder layers

  config.batch_size = 256
  config.learning_rate = 1e-3
  config.decay_per_epoch = 0.97
  # Steps run per compiled call; the greedy gap is measured after each
  # block count in eval_blocks (the last one ends training).
  config.block_steps = 20
  config.eval_blocks = (1, 2, 5, 10, 20, 30)

  if full:
    config.depth_layers = (1, 2, 4, 8)
    config.width_widths = (48, 64, 96, 128)
    config.matched_pairs = (("D64xL1", "D48xL2"), ("D64xL4", "D96xL2"),
                            ("D64xL8", "D128xL2"))
    config.lehd_baseline = True
    # 20 epochs of 50k at batch 256: 3900 steps.
    config.eval_blocks = (1, 2, 5, 10, 20, 40, 80, 120, 160, 195)
  if paper:
    config.seeds = (0, 1, 2)
  if smoke:
    config.num_train = 2000
    config.num_test = 200
    config.depth_layers = (1, 2)
    config.depth_width = 32
    config.width_widths = (16, 32)
    config.head_width = 8
    config.matched_pairs = (("D32xL1", "D16xL2"),)
    config.batch_size = 64
    config.block_steps = 10
    config.eval_blocks = (1, 3)
  return config


FIELDS = {
    "seeds": common.SEEDS,
    "num_cities": common.integer(4),
    "num_train": common.COUNT,
    "num_test": common.COUNT,
    "data_seed": common.NONNEGATIVE_INT,
    "depth_width": common.COUNT,
    "depth_layers": common.sequence(common.COUNT),
    "width_layers": common.COUNT,
    "width_widths": common.sequence(common.COUNT),
    "matched_pairs": common.sequence(
        common.sequence(common.NAME, min_len=2, max_len=2)),
    "head_width": common.COUNT,
    "lehd_baseline": common.FLAG,
    "batch_size": common.COUNT,
    "learning_rate": common.POSITIVE,
    "decay_per_epoch": common.real(0, 1, low_open=True),
    "block_steps": common.COUNT,
    "eval_blocks": common.sequence(common.COUNT, increasing=True),
}


def model_grid(config) -> dict[str, routing.HeavyDecoderConfig]:
  """Every model of the run, by name (``D<width>xL<layers>``, ``LEHD``)."""
  depth, layers = config.depth_width, config.width_layers
  grid = ({f"D{depth}xL{l}": (depth, l, 0) for l in config.depth_layers}
          | {f"D{w}xL{layers}": (w, layers, 0) for w in config.width_widths}
          | ({"LEHD": (depth, 6, 1)} if config.lehd_baseline else {}))
  return {name: routing.HeavyDecoderConfig(
      width=w, decoder_layers=l, encoder_layers=e,
      head_width=config.head_width) for name, (w, l, e) in grid.items()}


def validate(config):
  grid = model_grid(config)
  for a, b in config.matched_pairs:
    missing = [n for n in (a, b) if n not in grid]
    if missing:
      raise ValueError(f"matched_pairs {(a, b)}: {missing} not among the"
                       f" models {sorted(grid)}.")
    if grid[a].decoder_layers == grid[b].decoder_layers:
      raise ValueError(f"matched_pairs ({a}, {b}): equal depths compare no"
                       " depth with width.")
