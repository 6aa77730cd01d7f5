r"""EMO vs a standard MoE on four byte-level domains: expert subsets per domain.

Default (about 12 min on 2 idle CPU cores)::

  python -m experiments.emo --config experiments/configs/emo.py

Smoke test (under a minute)::

  python -m experiments.emo --config experiments/configs/emo.py:smoke

Our CPU-scale setup (docs/emo.md): a 2-layer decoder (d = 64, 4 heads,
context 128) whose FFNs are MoE layers of 31 routed SwiGLU experts (hidden
64) plus one shared expert, k = 3; EMO draws each document's pool from
U{4..31} per layer (the authors' U[8, 128] at k = 7, rescaled), the standard
MoE routes per token. Both train on the same batches (16 x 128 bytes packed
with EOS, code / prose / arithmetic / CSV) with AdamW (lr 3e-3, betas 0.9 /
0.95, weight decay 0.1 except embeddings, warmup + cosine, clip 1), CE +
1e-5 LM z-loss + (0.1 / layers) load balancing + (0.001 / layers) router
z-loss. Then, per domain, the greedy layerwise selector keeps 25% (8 of 32:
7 routed + shared) and 12.5% (4: 3 + shared) of the experts from a few
calibration documents, and held-out bits per byte of the pruned models are
compared with the full models (and with random subsets of the same size).

Paper scale (``:paper``)::

  python -m experiments.emo --config experiments/configs/emo.py:paper

The paper's run (16 layers, d = 2048, 1T tokens) is far past one GPU. ``:paper``
keeps its MoE geometry: 128 experts (127 routed + 1 shared), k = 7, EMO pools
from U{8..127}, expert hidden d_model / 2, its learning rate (4e-3) and
"ragged_dot" expert matmuls, in the largest transformer we estimate fits the
budget: 4 layers, d = 128, 4 heads, context 256, batch 16 x 256 bytes, 3,000
steps (150 warm-up), on as many documents as the domains hold (up to 1,000
per domain: about 2.5 MB of training text), 3 seeds; 25% keeps 32 experts,
12.5% keeps 16; 64 held-out windows of 256 bytes per domain. Expected wall time
on one H100: about 10 minutes, an estimate (no GPU was lent to measure it):
about 1e11 FLOPs a step (expert and attention matmuls) in 15-25 ms
(launch-bound, EMO's pool ranks and the ragged matmuls included), so about
60 s per model, 6 models, plus the selector's forwards and about 3 min of
compilation. ``PAPER_FEW_STEPS`` keeps the model and data sizes and runs 2
steps of one seed with the blocked grouped matmul (XLA:CPU's "ragged_dot" at
127 experts took about a minute a step).
"""

import ml_collections

from experiments.configs import common
from jaxpapers import moe


# The paper config at its model and data sizes, for a few steps on CPU: 2
# steps of one seed, 2 windows, one fraction, and the blocked grouped matmul
# (XLA:CPU runs "ragged_dot" at 127 experts densely: about a minute a step).
PAPER_FEW_STEPS = {"seeds": (0,), "train.num_steps": 2, "train.warmup_steps": 1,
                   "train.batch_size": 4, "log_every": 1, "checkpoint_every": 2,
                   "eval.max_windows": 2, "eval.calibration_docs": 1,
                   "eval.fractions": (0.25,), "eval.random_subsets": False,
                   "model.grouped_matmul": "blocked"}


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """Returns the config; ``arg="smoke"`` gives a sub-minute run, ``"paper"``
  the paper's expert geometry (127 routed + 1 shared, k = 7) in 4 layers."""
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.seeds = (0, 1, 2)
  config.models = ("standard", "emo")

  config.data = ml_collections.ConfigDict()
  config.data.docs_per_domain = 240
  config.data.min_chars = 256
  config.data.max_chars = 2048
  config.data.max_chunks_per_text = 16
  config.data.valid_every = 10
  config.data.seed = 0

  config.model = ml_collections.ConfigDict()
  config.model.d_model = 64
  config.model.num_heads = 4
  config.model.num_layers = 2
  config.model.context = 128
  config.model.num_experts = 31  # routed; + 1 shared = 32
  config.model.k = 3
  config.model.d_hidden = 64
  config.model.pool_low = 4  # EMO pool ~ U{pool_low..num_experts}
  config.model.grouped_matmul = "blocked"  # ragged_dot is dense work on CPU
  config.model.block_size = 64

  config.train = ml_collections.ConfigDict()
  config.train.batch_size = 16
  config.train.num_steps = 1500
  config.train.warmup_steps = 75
  config.train.learning_rate = 3e-3
  config.train.weight_decay = 0.1
  config.train.clip_norm = 1.0
  config.train.lm_z_weight = 1e-5
  config.train.load_balance_weight = 0.1  # divided by the number of layers
  config.train.router_z_weight = 0.001  # divided by the number of layers
  config.log_every = 50
  config.checkpoint_every = 250

  config.eval = ml_collections.ConfigDict()
  config.eval.max_windows = 16  # held-out windows of 128 bytes per domain
  config.eval.calibration_docs = 4
  config.eval.fractions = (0.25, 0.125)  # of all 32 experts, shared included
  config.eval.random_subsets = True

  if common.is_smoke(arg):
    config.seeds = (0,)
    config.data.docs_per_domain = 40
    config.model.d_model = 32
    config.model.num_heads = 2
    config.model.num_experts = 15
    config.model.k = 2
    config.model.d_hidden = 32
    config.model.pool_low = 3
    config.model.context = 64
    config.train.batch_size = 8
    config.train.num_steps = 40
    config.train.warmup_steps = 5
    config.log_every = 10
    config.checkpoint_every = 20
    config.eval.max_windows = 4
    config.eval.calibration_docs = 2
  if common.is_paper(arg):
    config.data.docs_per_domain = 1000  # code and arithmetic; prose and CSV hold fewer
    config.model.d_model = 128
    config.model.num_layers = 4
    config.model.context = 256
    config.model.num_experts = 127  # routed; + 1 shared = 128, as in the paper
    config.model.k = 7
    config.model.d_hidden = 64  # d_model / 2, as the paper's 1024 for 2048
    config.model.pool_low = 8  # the paper's U[8, 128]
    config.model.grouped_matmul = "ragged_dot"
    config.train.num_steps = 3000
    config.train.warmup_steps = 150
    config.train.learning_rate = 4e-3  # the paper's
    config.checkpoint_every = 500
    config.eval.max_windows = 64
  return config


FIELDS = {
    "seed": common.NONNEGATIVE_INT,
    "seeds": common.SEEDS,
    "models": common.sequence(common.one_of("standard", "emo")),
    "data.docs_per_domain": common.COUNT,
    "data.min_chars": common.COUNT,
    "data.max_chars": common.COUNT,
    "data.max_chunks_per_text": common.COUNT,
    "data.valid_every": common.integer(2),
    "data.seed": common.NONNEGATIVE_INT,
    "model.d_model": common.COUNT,
    "model.num_heads": common.COUNT,
    "model.num_layers": common.COUNT,
    "model.context": common.COUNT,
    "model.num_experts": common.COUNT,
    "model.k": common.COUNT,
    "model.d_hidden": common.COUNT,
    "model.pool_low": common.COUNT,
    "model.grouped_matmul": common.one_of("ragged_dot", "blocked"),
    "model.block_size": common.COUNT,
    "train.batch_size": common.COUNT,
    "train.num_steps": common.COUNT,
    "train.warmup_steps": common.NONNEGATIVE_INT,
    "train.learning_rate": common.POSITIVE,
    "train.weight_decay": common.NONNEGATIVE,
    "train.clip_norm": common.POSITIVE,
    "train.lm_z_weight": common.NONNEGATIVE,
    "train.load_balance_weight": common.NONNEGATIVE,
    "train.router_z_weight": common.NONNEGATIVE,
    "log_every": common.COUNT,
    "checkpoint_every": common.COUNT,
    "eval.max_windows": common.COUNT,
    "eval.calibration_docs": common.COUNT,
    "eval.fractions": common.sequence(common.real(0, 1, low_open=True)),
    "eval.random_subsets": common.FLAG,
}


def moe_config(config, kind: str) -> moe.MoEConfig:
  """The MoE layer's config of model ``kind`` (refuses bad hyperparameters by name)."""
  m = config.model
  return moe.MoEConfig(
      num_experts=m.num_experts, k=m.k, d_hidden=m.d_hidden,
      routing="emo" if kind == "emo" else "topk",
      pool_size=(m.pool_low, m.num_experts),
      grouped_matmul=m.grouped_matmul, block_size=m.block_size)


def validate(config):
  """Refuses relations between fields the binary cannot run (a ValueError, by name)."""
  for failed, problem in [
      (sorted(config.models) != ["emo", "standard"], f"models={config.models}:"
       " the claim compares exactly 'standard' and 'emo'"),
      (config.checkpoint_every % config.log_every, "checkpoint_every="
       f"{config.checkpoint_every} must be a multiple of log_every="
       f"{config.log_every}"),
      (config.data.min_chars > config.data.max_chars, "data.min_chars="
       f"{config.data.min_chars} exceeds data.max_chars="
       f"{config.data.max_chars}")]:
    if failed:
      raise ValueError(problem + ".")
  for kind in config.models:
    moe_config(config, kind)  # k, the EMO pool and the matmul, by name
