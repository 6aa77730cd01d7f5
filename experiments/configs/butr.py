r"""BUTR's budgeting view on generated tiny-object images (docs/butr.md).

Default (about 2 min on 2 CPU cores)::

  python -m experiments.butr --config experiments/configs/butr.py

Smoke test (under a minute)::

  python -m experiments.butr --config experiments/configs/butr.py:smoke

Paper scale (``:paper``): AI-TOD-v2's image side (800 px) at the finest level
of a 5-scale DINO (stride 4: 200 x 200 = 40,000 proposals instead of 1,024),
object counts up to DQ-DETR's largest budget (1,500, with ``butr.k_max`` at
that budget, the spec's flag), 14,000 evaluation images (about AI-TOD-v2's
14,018 test images) and calibration on 40 images (1.6 M proposals, 8x the
default's)::

  python -m experiments.butr --config experiments/configs/butr.py:paper

Expected wall time on one H100: about 5 minutes, an estimate, not measured.
The work per image is dominated by two IoU tables of 40,000 proposals x 1,500
boxes (the rules padded to every proposal) and one for the calibration labels:
about 1.5 s per image on 2 CPU cores (the few-step run below: 28 s of CPU
time for 12 images, compilation included), memory-bound, so a few ms per
image on a GPU at chunks of 8 (1.9 GB per table). ``PAPER_FEW_STEPS`` keeps
the image, proposal and count sizes and cuts the images to 4 + 8: 28 s of CPU
time (150 s wall on 2 heavily shared cores).

128 x 128 images of Gaussian blobs (count log-uniform in [1, 400], sigma in
[0.7, 2] px, noise s.d. 0.05); a fixed LoG "encoder" on a stride-4 token
grid (1024 proposals) with its confidence calibrated once by logistic
regression on 200 images; budgets of BUTR (our reconstruction), fixed K,
DQ-DETR's buckets (per image and batch-max) and an oracle on the true count.
"""

import ml_collections

from experiments.configs import common
from jaxpapers import detection


# The paper config at its image, proposal and count sizes, on 4 + 8 images.
PAPER_FEW_STEPS = {"data.num_fit_images": 4, "data.num_eval_images": 8,
                   "data.chunk": 4}


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """Returns the config; ``arg="smoke"`` gives a sub-minute run, ``"paper"``
  800 px images with 40,000 proposals and up to 1,500 objects."""
  config = ml_collections.ConfigDict()
  config.seed = 0

  config.data = ml_collections.ConfigDict()
  config.data.image_size = 128
  config.data.count_range = (1, 400)
  config.data.sigma_range = (0.7, 2.0)
  config.data.noise_std = 0.05
  config.data.num_fit_images = 200  # calibrate the encoder's confidence
  config.data.num_eval_images = 2000
  config.data.chunk = 100  # images per compiled evaluation call

  config.stride = 4  # 32 x 32 tokens = 1024 proposals
  config.iou_threshold = 0.5

  config.butr = ml_collections.ConfigDict()  # our reconstruction's defaults
  config.butr.threshold = 0.2
  config.butr.rate = 1.5
  config.butr.margin = 50
  config.butr.k_min = 100
  config.butr.k_max = 900  # DINO's fixed query count; 1500 = DQ-DETR's largest
  config.butr.count = "soft"

  config.fixed_ks = (100, 300, 900)
  config.dq_detr = ml_collections.ConfigDict()
  config.dq_detr.count_thresholds = (10, 100, 500)
  config.dq_detr.budgets = (300, 500, 900, 1500)
  config.dq_detr.batch_size = 4  # a batch takes the budget of its densest image

  # DQ-DETR's two sparse density classes (fewer than 100 objects).
  config.sparse_max_count = 99
  config.count_bins = (1, 10, 30, 100, 200, 401)  # [lo, hi) for the figures
  config.recall_tolerance = 0.01  # "keeps recall": at most 1 point lower
  config.half_budget_bound = 0.55  # "about half": mean K <= 0.55 x the other

  if common.is_smoke(arg):
    config.data.num_fit_images = 40
    config.data.num_eval_images = 96
    config.data.chunk = 48
  if common.is_paper(arg):
    config.data.image_size = 800  # AI-TOD-v2's images are 800 x 800
    config.data.count_range = (1, 1500)  # up to DQ-DETR's largest budget
    config.data.num_fit_images = 40  # labels: 40 x 40,000 x 1,500 IoUs
    config.data.num_eval_images = 14_000
    config.data.chunk = 8  # each IoU table: 8 x 40,000 x 1,500 floats
    config.butr.k_max = 1500  # the flag matching DQ-DETR's largest budget
    config.count_bins = (1, 10, 30, 100, 300, 1000, 1501)
  return config


FIELDS = {
    "seed": common.NONNEGATIVE_INT,
    "data.image_size": common.COUNT,
    "data.num_fit_images": common.COUNT,
    "data.num_eval_images": common.COUNT,
    "data.chunk": common.COUNT,
    "data.count_range": common.sequence(common.COUNT, min_len=2, max_len=2),
    "data.sigma_range": common.sequence(common.POSITIVE, min_len=2, max_len=2),
    "data.noise_std": common.NONNEGATIVE,
    "stride": common.COUNT,
    "butr.count": common.one_of("soft", "hard"),
    "butr.k_min": common.COUNT,
    "butr.k_max": common.COUNT,
    "butr.margin": common.NONNEGATIVE_INT,
    "butr.rate": common.real(1),
    "butr.threshold": common.FRACTION,
    "dq_detr.batch_size": common.COUNT,
    "dq_detr.budgets": common.sequence(common.COUNT, increasing=True),
    "dq_detr.count_thresholds": common.sequence(common.COUNT, increasing=True),
    "fixed_ks": common.sequence(common.COUNT),
    "sparse_max_count": common.COUNT,
    "iou_threshold": common.real(0, 1, low_open=True),
    "count_bins": common.sequence(common.COUNT, min_len=2, increasing=True),
    "recall_tolerance": common.FRACTION,
    "half_budget_bound": common.real(0, low_open=True),
}


def validate(config):
  """Relations between fields; each field's range is in ``FIELDS``."""
  if config.data.num_eval_images % config.data.chunk:
    raise ValueError(f"num_eval_images={config.data.num_eval_images} must be"
                     f" a multiple of chunk={config.data.chunk}.")
  if config.data.chunk % config.dq_detr.batch_size:
    raise ValueError(f"chunk={config.data.chunk} must be a multiple of"
                     f" dq_detr.batch_size={config.dq_detr.batch_size}.")
  if config.data.image_size % config.stride:
    raise ValueError(f"image_size must be a multiple of stride={config.stride}.")
  detection.butr(**config.butr)  # refuses bad hyperparameters by name
