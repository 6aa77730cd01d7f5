"""Mixture-of-experts layers, routing, expert subsets, diagnostics (EMO)."""

from jaxpapers.moe.diagnostics import domain_mutual_information
from jaxpapers.moe.dispatch import capacity_experts
from jaxpapers.moe.dispatch import dropless_experts
from jaxpapers.moe.dispatch import expert_capacity
from jaxpapers.moe.dispatch import ExpertWeights
from jaxpapers.moe.dispatch import swiglu
from jaxpapers.moe.layer import ExpertMask
from jaxpapers.moe.layer import MoE
from jaxpapers.moe.layer import MoEConfig
from jaxpapers.moe.layer import moe_ffn_factory
from jaxpapers.moe.losses import load_balance_loss
from jaxpapers.moe.losses import router_z_loss
from jaxpapers.moe.losses import training_loss
from jaxpapers.moe.routing import check_segment_ids
from jaxpapers.moe.routing import document_index
from jaxpapers.moe.routing import draw_pool_sizes
from jaxpapers.moe.routing import emo_route
from jaxpapers.moe.routing import Routing
from jaxpapers.moe.routing import topk_route
from jaxpapers.moe.subsets import expert_usage
from jaxpapers.moe.subsets import mask_experts
from jaxpapers.moe.subsets import moe_layers
from jaxpapers.moe.subsets import prune_experts
from jaxpapers.moe.subsets import routing_statistics
from jaxpapers.moe.subsets import run_with_statistics
from jaxpapers.moe.subsets import select_experts
