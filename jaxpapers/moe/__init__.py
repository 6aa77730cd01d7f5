"""Mixture-of-experts layers, routing, training, subsets, diagnostics (EMO)."""

from jaxpapers import _deprecation
from jaxpapers.moe._diagnostics import domain_mutual_information
from jaxpapers.moe._dispatch import capacity_experts
from jaxpapers.moe._dispatch import dropless_experts
from jaxpapers.moe._dispatch import expert_capacity
from jaxpapers.moe._dispatch import ExpertWeights
from jaxpapers.moe._dispatch import swiglu
from jaxpapers.moe._evaluation import subset_bits_per_byte
from jaxpapers.moe._layer import ExpertMask
from jaxpapers.moe._layer import MoE
from jaxpapers.moe._layer import MoEConfig
from jaxpapers.moe._layer import moe_ffn_factory
from jaxpapers.moe._losses import load_balance_loss
from jaxpapers.moe._losses import router_z_loss
from jaxpapers.moe._losses import training_loss
from jaxpapers.moe._routing import check_segment_ids
from jaxpapers.moe._routing import document_index
from jaxpapers.moe._routing import draw_pool_sizes
from jaxpapers.moe._routing import emo_route
from jaxpapers.moe._routing import Routing
from jaxpapers.moe._routing import topk_route
from jaxpapers.moe._subsets import expert_usage
from jaxpapers.moe._subsets import mask_experts
from jaxpapers.moe._subsets import moe_layers
from jaxpapers.moe._subsets import prune_experts
from jaxpapers.moe._subsets import routing_statistics
from jaxpapers.moe._subsets import run_with_statistics
from jaxpapers.moe._subsets import select_experts
from jaxpapers.moe._training import train_steps

__all__ = [
    "domain_mutual_information",
    "capacity_experts",
    "dropless_experts",
    "expert_capacity",
    "ExpertWeights",
    "swiglu",
    "subset_bits_per_byte",
    "ExpertMask",
    "MoE",
    "MoEConfig",
    "moe_ffn_factory",
    "load_balance_loss",
    "router_z_loss",
    "training_loss",
    "check_segment_ids",
    "document_index",
    "draw_pool_sizes",
    "emo_route",
    "Routing",
    "topk_route",
    "expert_usage",
    "mask_experts",
    "moe_layers",
    "prune_experts",
    "routing_statistics",
    "run_with_statistics",
    "select_experts",
    "train_steps",
]

_deprecation.install(__name__)
