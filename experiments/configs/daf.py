r"""DAF at CPU scale: curvature-aware adapter fusion vs naive fusion on digits.

Default (about 5 min on 2 idle CPU cores)::

  python -m experiments.daf --config experiments/configs/daf.py

Smoke test (under a minute)::

  python -m experiments.daf --config experiments/configs/daf.py:smoke

Paper scale (``:paper``): the paper's ViT-B/16 benchmarks are out of reach, so
the digits protocol at the paper's adapter sizes: a 768-d backbone (ViT-B/16's
feature width) with a rank-64 adapter (AdaptFormer's ViT-B bottleneck), and 5
class orders x 5 seeds (25 paired runs per method)::

  python -m experiments.daf --config experiments/configs/daf.py:paper

Expected wall time on one H100: about 5 minutes, an estimate, not measured.
The work is 25 x 8 sequences of 5 tasks x 15 epochs: 3,000 sequence-epochs of
about 16 batch-16 steps, 48,000 small steps in all. At this size a GPU step
costs its launch latency, a few ms at most, so 2-4 minutes plus compilation.
(On 2 shared CPU cores a sequence-epoch takes about 20 ms at width 256: the
``epochs`` study's 45 sequences took 26 s more for 26 more epochs.)
``PAPER_FEW_STEPS`` (one order, one seed, one epoch per task, same model and
data) takes 20 s of CPU time, most of it compilation (150 s wall on 2
heavily shared cores).

scikit-learn's digits (70/30 stratified split) through a frozen random-feature
"backbone" (64 -> 256, ReLU, fixed seed), split into 5 tasks of 2 classes in
3 class orders; a residual low-rank adapter (rank 16) and a cosine head
(scale 20) are trained 15 epochs per task (SGD 0.01 cosine, momentum 0.9,
weight decay 5e-4, batch 16), 3 seeds per order (``docs/daf.md``).
"""

import ml_collections

from experiments.configs import common
from jaxpapers import continual

METHODS = ("last_adapter", "uniform_merge", "single_beta", "two_coef",
           "per_layer", "two_coef_first_task", "sequential", "joint")


# The paper config at its model and data sizes: one order, one seed, 1 epoch.
PAPER_FEW_STEPS = {"seeds": (0,), "orders": (0,), "training.epochs": 1}


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """Returns the config; ``arg="smoke"`` gives a sub-minute run, ``"paper"`` a
  768-d backbone, rank-64 adapter and 5 orders x 5 seeds."""
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.seeds = (0, 1, 2)
  config.orders = (0, 1, 2)  # class order k: numpy permutation of seed k
  config.methods = METHODS

  config.data = ml_collections.ConfigDict()
  config.data.test_fraction = 0.3
  config.data.split_seed = 0
  config.data.num_tasks = 5
  config.data.classes_per_task = 2

  config.model = ml_collections.ConfigDict()
  config.model.backbone_width = 256
  config.model.backbone_seed = 0
  # Centre and scale the backbone's outputs (fixed, from the unlabelled pool).
  config.model.standardize_features = True
  config.model.rank = 16
  config.model.scale = 20.0

  config.training = ml_collections.ConfigDict()
  config.training.epochs = 15
  config.training.batch_size = 16
  config.training.learning_rate = 0.01
  config.training.momentum = 0.9
  config.training.weight_decay = 5e-4

  # lambda = rho * mean curvature (the PAC-Bayes KL weight; our choice).
  config.rho = 0.01

  if common.is_smoke(arg):
    config.seeds = (0,)
    config.orders = (0, 1)
    config.training.epochs = 3
  if common.is_paper(arg):
    config.model.backbone_width = 768  # ViT-B/16's feature width
    config.model.rank = 64  # AdaptFormer's ViT-B bottleneck
    config.seeds = (0, 1, 2, 3, 4)
    config.orders = (0, 1, 2, 3, 4)
  return config


FIELDS = {
    "seed": common.NONNEGATIVE_INT,
    "seeds": common.SEEDS,
    "orders": common.sequence(common.NONNEGATIVE_INT),
    "data.num_tasks": common.COUNT,
    "data.classes_per_task": common.COUNT,
    "data.split_seed": common.NONNEGATIVE_INT,
    "data.test_fraction": common.real(0, 1, low_open=True, high_open=True),
    "model.backbone_seed": common.NONNEGATIVE_INT,
    "model.backbone_width": common.COUNT,
    "model.rank": common.COUNT,
    "model.scale": common.POSITIVE,
    "model.standardize_features": common.FLAG,
    "training.batch_size": common.COUNT,
    "training.epochs": common.COUNT,
    "training.learning_rate": common.POSITIVE,
    "training.momentum": common.real(0, 1, high_open=True),
    "training.weight_decay": common.NONNEGATIVE,
    "rho": common.NONNEGATIVE,
    "methods": common.NAMES,
}


def validate(config: ml_collections.ConfigDict) -> None:
  """Relations between fields the binary cannot run (after the ranges hold)."""
  if not set(config.methods) <= set(METHODS):
    raise ValueError(f"methods {config.methods}: known are {sorted(METHODS)}.")
  if config.data.num_tasks * config.data.classes_per_task != 10:
    raise ValueError("data.num_tasks x data.classes_per_task must be 10 (the"
                     f" digits); got {config.data.num_tasks} x"
                     f" {config.data.classes_per_task}.")
  continual.TaskTraining(**config.training.to_dict())
  continual.FusionConfig(rho=config.rho)
