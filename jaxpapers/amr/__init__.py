"""Adaptive mesh refinement for transformers (WAMRViT).

Balanced quadtrees built under ``jit`` from dense fields
(:func:`build_quadtree`), leaf tokens in uniform and native storage
(:func:`tokenize`), 3-axis rotary embeddings over (x, y, scale)
(:func:`rope_3d`), cell-space regridding (:func:`regrid`), the WAMRViT
(uniform and native storage) / uniform ViT models, their training objective,
batches and steps (:func:`train_steps`), their inference rollouts with
regridding (:func:`quadtree_rollout`, :func:`native_rollout`) and the
rollouts' per-step VRMSE on the field and the region of interest
(:func:`evaluate_rollout`). The slow Python reference that tests and
benchmarks compare against is private (``jaxpapers.amr._reference``).
"""

from jaxpapers import _deprecation
from jaxpapers.amr._evaluation import evaluate_rollout
from jaxpapers.amr._evaluation import model_rollout
from jaxpapers.amr._evaluation import region_of_interest
from jaxpapers.amr._evaluation import StageTimer
from jaxpapers.amr._evaluation import summarize_rollout
from jaxpapers.amr._evaluation import vrmse
from jaxpapers.amr._native import ExpandBlock
from jaxpapers.amr._native import NativeWAMRViT
from jaxpapers.amr._native import pixel_shuffle
from jaxpapers.amr._native import ShrinkBlock
from jaxpapers.amr._native import swiglu
from jaxpapers.amr._quadtree import balance
from jaxpapers.amr._quadtree import build_quadtree
from jaxpapers.amr._quadtree import check_budget
from jaxpapers.amr._quadtree import Geometry
from jaxpapers.amr._quadtree import leaf_coordinates
from jaxpapers.amr._quadtree import make_geometry
from jaxpapers.amr._quadtree import Quadtree
from jaxpapers.amr._quadtree import truncate
from jaxpapers.amr._regrid import regrid
from jaxpapers.amr._rollout import bucket_size
from jaxpapers.amr._rollout import build_meshes
from jaxpapers.amr._rollout import finest_pixels
from jaxpapers.amr._rollout import MeshConfig
from jaxpapers.amr._rollout import native_rollout
from jaxpapers.amr._rollout import quadtree_rollout
from jaxpapers.amr._rollout import regrid_native
from jaxpapers.amr._rollout import RolloutStep
from jaxpapers.amr._rollout import uniform_rollout
from jaxpapers.amr._rope import rope_3d
from jaxpapers.amr._tokens import detokenize
from jaxpapers.amr._tokens import tokenize
from jaxpapers.amr._training import batch_loss
from jaxpapers.amr._training import pushforward_loss
from jaxpapers.amr._training import relative_l2
from jaxpapers.amr._training import residual_step
from jaxpapers.amr._training import sample_batch
from jaxpapers.amr._training import trajectory_meshes
from jaxpapers.amr._training import train_steps
from jaxpapers.amr._training import TrainingBatch
from jaxpapers.amr._vit import BackboneConfig
from jaxpapers.amr._vit import ParallelBlock
from jaxpapers.amr._vit import patchify
from jaxpapers.amr._vit import TokenBackbone
from jaxpapers.amr._vit import uniform_vit_config
from jaxpapers.amr._vit import UniformViT
from jaxpapers.amr._vit import unpatchify
from jaxpapers.amr._vit import WAMRViT
from jaxpapers.amr._vit import wamrvit_config

__all__ = [
    "evaluate_rollout",
    "model_rollout",
    "region_of_interest",
    "StageTimer",
    "summarize_rollout",
    "vrmse",
    "ExpandBlock",
    "NativeWAMRViT",
    "pixel_shuffle",
    "ShrinkBlock",
    "swiglu",
    "balance",
    "build_quadtree",
    "check_budget",
    "Geometry",
    "leaf_coordinates",
    "make_geometry",
    "Quadtree",
    "truncate",
    "regrid",
    "bucket_size",
    "build_meshes",
    "finest_pixels",
    "MeshConfig",
    "native_rollout",
    "quadtree_rollout",
    "regrid_native",
    "RolloutStep",
    "uniform_rollout",
    "rope_3d",
    "detokenize",
    "tokenize",
    "batch_loss",
    "pushforward_loss",
    "relative_l2",
    "residual_step",
    "sample_batch",
    "trajectory_meshes",
    "train_steps",
    "TrainingBatch",
    "BackboneConfig",
    "ParallelBlock",
    "patchify",
    "TokenBackbone",
    "uniform_vit_config",
    "UniformViT",
    "unpatchify",
    "WAMRViT",
    "wamrvit_config",
]

_deprecation.install(__name__)
