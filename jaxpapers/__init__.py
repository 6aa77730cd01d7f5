"""jaxpapers: JAX-first functional numerics from 2026 research papers.

Areas are organised by what things are; each re-exports its public names:

* :mod:`jaxpapers.curvature` -- Hessian-vector products, Lanczos / power
  iteration, Batch Sharpness and GNI (Edge of Stochastic Stability).
* :mod:`jaxpapers.optim` -- optax transforms (Batch Sharpness tracking,
  EMA-Nesterov, SOAP).
* :mod:`jaxpapers.losses` -- losses and regularisers (rollout consistency).
* :mod:`jaxpapers.saddle` -- distributed saddle problems: games, GDA / EG / OGDA,
  the Decoupled Method, one device per player.
* :mod:`jaxpapers.graph` -- jraph graphs with static padding, a GCN, EMC closed-form
  graph memory and test-time adaptation baselines.
* :mod:`jaxpapers.moe` -- mixture-of-experts routing (top-k, EMO document pools),
  dispatch, an nnx MoE layer, expert subsets.
* :mod:`jaxpapers.amr` -- adaptive mesh refinement for ViTs: jit-compiled balanced
  quadtrees, leaf tokens, 3-axis RoPE, regridding, WAMRViT.
* :mod:`jaxpapers.nesy` -- neurosymbolic learning as EM: exact carry-chain and
  enumerated-constraint E-steps, approximate E-steps, the M-step (EM-NeSy).
* :mod:`jaxpapers.var` -- editing bitwise-residual visual autoregressive
  generators: KL trust-region bit guidance, masked residual editing (BitResEdit).
* :mod:`jaxpapers.detection` -- training-free query budgets and static-shape
  top-K query selection for DETRs, box IoU and recall (BUTR).
* :mod:`jaxpapers.matching` -- a dynamic shifted-quadtree W_p matching under
  insertions and deletions, with exact references.
* :mod:`jaxpapers.continual` -- curvature-aware adapter fusion for
  class-incremental learning (DAF), adapters and a cosine head.
* :mod:`jaxpapers.auctions` -- a jit-compiled repeated-auction environment
  (gymnax-like), myopic bidding, MPC over shading, a DP oracle, PPO
  (DynamAuction; reconstruction).
* :mod:`jaxpapers.rl` -- GRPO advantages, PPO-clip over action tokens, the ECHO
  environment cross-entropy and a jit-compiled key-value shell environment (ECHO).
* :mod:`jaxpapers.routing` -- TSP: a LEHD-style heavy-decoder construction model,
  greedy and sampling decoding, Held-Karp, LKH-3 labels, nearest neighbour and
  2-opt.
* :mod:`jaxpapers.data` -- data sets that ship inside pip packages, and
  mini-batch sampling as a pure function of a key.
* :mod:`jaxpapers.profiling` -- wall time and compiled memory of jitted calls.
* :mod:`jaxpapers.models` -- small reference models (pure MLP, nnx transformer
  LM with a swappable FFN, forecasters).

Each area is an attribute of the package, imported on first use (as in
``jax`` and ``scipy``): ``import jaxpapers; jaxpapers.losses.rollout_consistency``.
"""

import importlib

__version__ = "0.2.0"

# Every public module of the package (tests check the list against the files).
_AREAS = ("amr", "auctions", "continual", "curvature", "data", "detection",
          "evalcards", "graph", "losses", "matching", "models", "moe", "nesy",
          "optim", "profiling", "rl", "routing", "saddle", "tree", "var")


def __getattr__(name: str):
  if name in _AREAS:
    module = importlib.import_module(f"{__name__}.{name}")
    globals()[name] = module
    return module
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
  return sorted({*globals(), *_AREAS})
