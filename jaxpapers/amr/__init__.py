"""Adaptive mesh refinement for transformers (WAMRViT).

Balanced quadtrees built under ``jit`` from dense fields, leaf tokens in
uniform and native storage, 3-axis rotary embeddings over (x, y, scale),
cell-space regridding, the WAMRViT (uniform and native storage) / uniform ViT
models, their training objective, batches and steps
(:mod:`jaxpapers.amr.training`),
their inference rollouts with regridding (:mod:`jaxpapers.amr.rollout`) and
the rollouts' per-step VRMSE on the field and the region of interest
(:mod:`jaxpapers.amr.evaluation`).
:mod:`jaxpapers.amr.reference` holds the slow Python reference that tests and
benchmarks compare against.
"""

from jaxpapers.amr.evaluation import evaluate_rollout
from jaxpapers.amr.evaluation import model_rollout
from jaxpapers.amr.evaluation import region_of_interest
from jaxpapers.amr.evaluation import StageTimer
from jaxpapers.amr.evaluation import summarize_rollout
from jaxpapers.amr.evaluation import vrmse
from jaxpapers.amr.native import ExpandBlock
from jaxpapers.amr.native import NativeWAMRViT
from jaxpapers.amr.native import pixel_shuffle
from jaxpapers.amr.native import ShrinkBlock
from jaxpapers.amr.native import swiglu
from jaxpapers.amr.quadtree import balance
from jaxpapers.amr.quadtree import build_quadtree
from jaxpapers.amr.quadtree import check_budget
from jaxpapers.amr.quadtree import Geometry
from jaxpapers.amr.quadtree import leaf_coordinates
from jaxpapers.amr.quadtree import make_geometry
from jaxpapers.amr.quadtree import Quadtree
from jaxpapers.amr.quadtree import truncate
from jaxpapers.amr.regrid import regrid
from jaxpapers.amr.rollout import bucket_size
from jaxpapers.amr.rollout import build_meshes
from jaxpapers.amr.rollout import finest_pixels
from jaxpapers.amr.rollout import MeshConfig
from jaxpapers.amr.rollout import native_rollout
from jaxpapers.amr.rollout import quadtree_rollout
from jaxpapers.amr.rollout import regrid_native
from jaxpapers.amr.rollout import RolloutStep
from jaxpapers.amr.rollout import uniform_rollout
from jaxpapers.amr.rope import rope_3d
from jaxpapers.amr.tokens import detokenize
from jaxpapers.amr.tokens import tokenize
from jaxpapers.amr.training import batch_loss
from jaxpapers.amr.training import pushforward_loss
from jaxpapers.amr.training import relative_l2
from jaxpapers.amr.training import residual_step
from jaxpapers.amr.training import sample_batch
from jaxpapers.amr.training import trajectory_meshes
from jaxpapers.amr.training import train_steps
from jaxpapers.amr.training import TrainingBatch
from jaxpapers.amr.vit import BackboneConfig
from jaxpapers.amr.vit import ParallelBlock
from jaxpapers.amr.vit import patchify
from jaxpapers.amr.vit import TokenBackbone
from jaxpapers.amr.vit import uniform_vit_config
from jaxpapers.amr.vit import UniformViT
from jaxpapers.amr.vit import unpatchify
from jaxpapers.amr.vit import WAMRViT
from jaxpapers.amr.vit import wamrvit_config
