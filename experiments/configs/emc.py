r"""EMC at CPU scale: closed-form graph memory vs gradient and generative adaptation.

Default (about 10 min on 2 idle CPU cores)::

  python -m experiments.emc --config experiments/configs/emc.py

Smoke test (under a minute)::

  python -m experiments.emc --config experiments/configs/emc.py:smoke

Two domain sequences, each a labelled source and 8 unlabelled target domains
(our CPU-scale protocol, ``docs/emc.md``): a contextual SBM whose class means rotate
and shift (n = 2000, C = 4, 32 features) and scikit-learn's digits as k-NN
graphs under growing rotation and pixel noise (1000 images per domain). A
GCAL-architecture GCN (2 layers, hidden 256, BatchNorm, dropout 0.2) is
trained on the source (Adam 1e-3, L2 5e-4, 100 epochs, best validation), then
every method adapts through the sequence without labels; 3 seeds. EMC's and
GCAL-style's update times are also compared over ``timing_rounds``
alternating rounds on the first seed's domains.

Paper scale (``:paper``)::

  python -m experiments.emc --config experiments/configs/emc.py:paper

EMC's sizes are unknown (we have its abstract only); its competitor GCAL
evaluates sequences of real graphs of a few thousand to tens of thousands of
nodes. ``:paper`` runs the prolonged shift the abstract is about at the
largest generated size we expect one accelerator to finish in 15 minutes:
17 domains per sequence (a source and 16 targets), CSBM graphs of 10,000
nodes (expected degree 8 as in the default), all 1,797 digits images per
domain, the default GCN (hidden 256, 100 epochs), all 12 methods, 5 seeds.
Expected wall time on one H100: about 7 minutes, an estimate (no GPU was
lent when it was written): 120 runs (12 methods x 5 seeds x 2 sequences) of
16 updates timed 4 times and 153 evaluations each, about 26,000 compiled
calls at a few ms of dispatch each (80 s), about 24 compilations of a few
seconds (2 min), 10 source fits, and the CSBM edges drawn on the CPU (85
domains of 10^8 Bernoulli pairs, 1-2 s each, 2-3 min). ``PAPER_FEW_STEPS``
cuts it to one seed, a source and one target per sequence, 2 source epochs,
the smoke run's 4 methods (GCAL-style covers direct adaptation's code) and
one timing round, keeping the graph and model sizes: 129 s measured on 2
shared CPU cores (load average 2-5), not 30 s: compiling 8 updates at
10,000 nodes and hidden 256 and the 10,000-node GCAL-style update are most
of it (all 12 methods: 359 s under a load average near 15).
"""

import ml_collections

from experiments.configs import common

METHODS = (
    "frozen", "tent", "direct", "gcal", "emc", "emc_coral", "emc_bn",
    "emc_im_replay", "emc_evolve_none", "emc_evolve_drift",
    "emc_evolve_transition", "t3a",
)


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """Returns the config; ``arg="smoke"`` gives a sub-minute run, ``"paper"`` the paper scale."""
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.seeds = (0, 1, 2)
  config.sequences = ("csbm", "digits")
  config.methods = METHODS

  config.csbm = ml_collections.ConfigDict()
  config.csbm.num_domains = 9  # source + 8 targets
  config.csbm.num_nodes = 2000
  config.csbm.num_classes = 4
  config.csbm.feature_width = 32
  config.csbm.p_in = 0.01
  config.csbm.p_out = 0.002
  config.csbm.p_in_decay = 0.9
  config.csbm.rotation_deg = 15.0
  config.csbm.offset = 0.3

  config.digits = ml_collections.ConfigDict()
  config.digits.num_domains = 9
  config.digits.nodes_per_domain = 1000
  config.digits.k = 10
  config.digits.rotation_deg = 5.0
  config.digits.noise = 0.1

  config.model = ml_collections.ConfigDict()
  config.model.hidden = 256
  config.model.epochs = 100
  config.model.learning_rate = 1e-3
  config.model.weight_decay = 5e-4
  config.model.dropout_rate = 0.2

  # GCAL's test_epochs (default 1) for direct adaptation and the generative
  # baseline; warmup 0 so that GCAL generates memory at all.
  config.adapt_epochs = 1
  config.tent_learning_rate = 1e-3
  config.tent_steps = 1
  config.pad_multiple = 512
  # Rounds of the alternating EMC-vs-GCAL-style timing (the time check).
  config.timing_rounds = 9

  if common.is_paper(arg):
    config.seeds = (0, 1, 2, 3, 4)
    config.csbm.num_domains = config.digits.num_domains = 17
    config.csbm.num_nodes = 10_000
    config.csbm.p_in, config.csbm.p_out = 0.002, 0.0004  # expected degree 8, as by default
    config.digits.nodes_per_domain = 1797  # every image of the data set
  if common.is_smoke(arg):
    config.seeds = (0,)
    # GCAL-style covers direct adaptation's code path (its IM step).
    config.methods = ("frozen", "tent", "gcal", "emc")
    config.csbm.num_domains = 4
    config.csbm.num_nodes = 400
    config.csbm.p_in = 0.04
    config.csbm.p_out = 0.008
    config.digits.num_domains = 4
    config.digits.nodes_per_domain = 300
    config.model.hidden = 32
    config.model.epochs = 30
    config.pad_multiple = 128
  return config


# A few steps of :paper on CPU (graph and model sizes kept).
PAPER_FEW_STEPS = {"seeds": (0,), "methods": ("frozen", "tent", "gcal", "emc"),
                   "csbm.num_domains": 2, "digits.num_domains": 2,
                   "model.epochs": 2, "timing_rounds": 1}

FIELDS = {
    "seed": common.NONNEGATIVE_INT,
    "seeds": common.SEEDS,
    "sequences": common.sequence(common.one_of("csbm", "digits")),
    "methods": common.NAMES,
    "csbm.num_domains": common.integer(2),
    "csbm.num_nodes": common.COUNT,
    "csbm.num_classes": common.integer(2),
    "csbm.feature_width": common.COUNT,
    "csbm.p_in": common.FRACTION,
    "csbm.p_out": common.FRACTION,
    "csbm.p_in_decay": common.real(0, 1, low_open=True),
    "csbm.rotation_deg": common.real(),
    "csbm.offset": common.real(),
    "digits.num_domains": common.integer(2),
    "digits.nodes_per_domain": common.COUNT,
    "digits.k": common.COUNT,
    "digits.rotation_deg": common.real(),
    "digits.noise": common.NONNEGATIVE,
    "model.hidden": common.COUNT,
    "model.epochs": common.COUNT,
    "model.learning_rate": common.POSITIVE,
    "model.weight_decay": common.NONNEGATIVE,
    "model.dropout_rate": common.real(0, 1, high_open=True),
    "adapt_epochs": common.COUNT,
    "tent_learning_rate": common.POSITIVE,
    "tent_steps": common.COUNT,
    "pad_multiple": common.COUNT,
    "timing_rounds": common.COUNT,
}


def validate(config: ml_collections.ConfigDict) -> None:
  """Relations between fields the binary cannot run (after the ranges hold)."""
  if not set(config.methods) <= set(METHODS):
    raise ValueError(f"methods {config.methods}: known are {sorted(METHODS)}.")
