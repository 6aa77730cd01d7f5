r"""EM-NeSy at CPU scale: N-digit addition of scikit-learn digits.

Default (under 10 min on 2 idle CPU cores)::

  python -m experiments.em_nesy --config experiments/configs/em_nesy.py

Smoke test (under a minute)::

  python -m experiments.em_nesy --config experiments/configs/em_nesy.py:smoke

Paper scale (``:paper``): the protocol's 20,000 training sums per epoch (the
default uses 5,000), everything else as the default (N = 1, 2, 4, 15 and
100, six methods, 10 epochs, 3 seeds, 2,000 test sums, the 7-round cost
stage); MNIST itself is not used (the 8x8 scikit-learn digits stand in for
it). Expected wall time on one H100: about 10 minutes, an estimate, not a
measurement (no accelerator was lent when it was written): the run is
2,500 steps of 32 sums per method, N and seed (25 (N, method) cells x 3
seeds), each a scanned step of a few dozen small kernels plus the carry
chain's N-step scan (about 0.5 ms, and 2-3 ms at N = 100, at ~5 us a
launch), i.e. ~5 min of steps, plus ~40 compiles and the cost stage; on 2
CPU cores it is about 4x the default's training (~13 min + the cost stage).
``PAPER_FEW_STEPS`` keeps every N (1, 2, 4, 15; 100 for exact EM) and the
model but runs the semantic loss and exact EM only, one epoch of 10 steps at
one seed, a small test set and one timing round at N = 1, 2, 15.

The 1,797 digits are split 2/3 train, 1/3 test by image; an N-digit problem
draws 2N images of one split and is labelled by their sum only. An MLP
64-128-10 (Adam 1e-3, batch 32) learns the digits through the sum with each
method; 3 seeds. Methods (``docs/em_nesy.md``): ``semantic`` (autodiff of
log Z), ``em_exact`` (carry-chain E-step), ``em_rejection`` (S = 256),
``em_hard`` (Viterbi), ``em_stochastic`` (FFBS) and ``reinforce``
(leave-one-out baseline, S = 16). N = 100 runs ``exact_methods`` only. Cost
of one training step: EM vs semantic loss (alternating rounds) and EM with
the carry chain vs EM by enumeration of the 100^N worlds.
"""

import ml_collections

from experiments.configs import common
from jaxpapers import nesy

METHODS = ("semantic", "em_exact", "em_rejection", "em_hard", "em_stochastic",
           "reinforce")


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """Returns the config; ``arg="smoke"`` gives a sub-minute run."""
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.seeds = (0, 1, 2)
  config.num_digits = (1, 2, 4, 15)
  config.methods = METHODS
  # Long sums: only the exact E-step (and its autodiff twin) scale to them.
  config.exact_num_digits = (100,)
  config.exact_methods = ("em_exact",)

  # The paper's protocol has 20,000 sums per epoch; 5,000 keep the default
  # run within 10 CPU minutes (1,560 steps of 32 sums, docs/em_nesy.md).
  config.train_sums = 5000
  config.test_sums = 2000
  config.epochs = 10
  config.checkpoint_every = 5  # epochs
  config.batch_size = 32
  config.learning_rate = 1e-3
  config.hidden = 128
  config.m_steps = 1  # gradient steps per E-step
  config.rejection_samples = 256
  config.reinforce_samples = 16

  # Cost of one training step: N values (EM and semantic loss), rounds of
  # the alternating EM-vs-semantic timing, and the N of the enumeration.
  config.cost_num_digits = (1, 2, 4, 15, 100)
  config.timing_rounds = 7
  config.enumeration_num_digits = (1, 2)

  if common.is_paper(arg):
    config.train_sums = 20000  # the protocol's sums per epoch (625 steps)
  if common.is_smoke(arg):
    config.seeds = (0,)
    config.num_digits = (1, 15)
    config.exact_num_digits = (100,)
    config.train_sums = 320
    config.test_sums = 200
    config.epochs = 2
    config.checkpoint_every = 2
    config.methods = ("semantic", "em_exact", "em_rejection")
    config.cost_num_digits = (1, 2)
    config.timing_rounds = 2
  return config


# The paper config cut to a few steps: same N, methods and model, one seed.
PAPER_FEW_STEPS = {"seeds": (0,), "methods": ("semantic", "em_exact"), "train_sums": 320,
                   "test_sums": 200, "epochs": 1, "checkpoint_every": 1,
                   "cost_num_digits": (1, 2, 15), "timing_rounds": 1}


FIELDS = {
    "seed": common.NONNEGATIVE_INT,
    "seeds": common.SEEDS,
    "methods": common.NAMES,
    "exact_methods": common.sequence(common.NAME, min_len=0),
    "num_digits": common.sequence(common.COUNT),
    "exact_num_digits": common.sequence(common.COUNT, min_len=0),
    "cost_num_digits": common.sequence(common.COUNT, min_len=0),
    # N = 3 would enumerate 100^3 worlds per example: too large for a CPU.
    "enumeration_num_digits": common.sequence(common.integer(1, 2),
                                              min_len=0),
    "train_sums": common.COUNT,
    "test_sums": common.COUNT,
    "batch_size": common.COUNT,
    "epochs": common.COUNT,
    "checkpoint_every": common.COUNT,
    "hidden": common.COUNT,
    "learning_rate": common.POSITIVE,
    "m_steps": common.COUNT,
    "rejection_samples": common.COUNT,
    "reinforce_samples": common.COUNT,
    "timing_rounds": common.COUNT,
}


def validate(config: ml_collections.ConfigDict) -> None:
  """Raises ``ValueError`` for an unknown method or fewer training sums than a batch."""
  known = set(config.methods) | set(config.exact_methods)
  if not known <= set(nesy.METHODS):
    raise ValueError(f"methods {sorted(known)}: known are {nesy.METHODS}.")
  if config.train_sums < config.batch_size:
    raise ValueError(f"train_sums={config.train_sums} must be >= batch_size"
                     f"={config.batch_size}.")
