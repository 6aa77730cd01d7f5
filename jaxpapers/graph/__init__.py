"""Graph learning on jraph's GraphsTuple, and continual test-time graph adaptation.

* Graphs: a thin, tested layer over jraph (:func:`make_graph`,
  :func:`pad_graph`, masks, :func:`gcn_propagate`).
* The GCN source model as pure functions (:func:`init_gcn`, :func:`fit_source`).
* EMC, training-free closed-form memory crystallisation (:func:`crystallize`,
  :func:`emc_adapter`; a reconstruction, see :func:`crystallize`).
* Baselines: frozen, Tent, direct (IM) adaptation (:func:`frozen`,
  :func:`tent`, :func:`im_adaptation`) and a GCAL-style generative memory
  (:func:`generative_memory`).
* Drifting domain sequences: contextual SBM and digits k-NN graphs
  (:func:`csbm_sequence`, :func:`digits_sequence`).
* The :class:`Adapter` protocol, a method's run through a sequence
  (:func:`adapt_sequence`), the accuracy-matrix metrics (average performance,
  forgetting) and a run's evaluation with its update costs
  (:func:`evaluate_run`).
"""

from jaxpapers import _deprecation
from jaxpapers.graph._baselines import frozen
from jaxpapers.graph._baselines import TentState
from jaxpapers.graph._baselines import tent
from jaxpapers.graph._baselines import IMState
from jaxpapers.graph._baselines import im_step
from jaxpapers.graph._baselines import im_adaptation
from jaxpapers.graph._domains import Domain
from jaxpapers.graph._domains import DomainSequence
from jaxpapers.graph._domains import csbm_sequence
from jaxpapers.graph._domains import knn_edges
from jaxpapers.graph._domains import digits_sequence
from jaxpapers.graph._domains import PaddedDomains
from jaxpapers.graph._emc import EVOLVE as EMC_EVOLVE
from jaxpapers.graph._emc import PREDICT as EMC_PREDICT
from jaxpapers.graph._emc import ADAPT as EMC_ADAPT
from jaxpapers.graph._emc import COVARIANCE_SHRINKAGE
from jaxpapers.graph._emc import EMCOptions
from jaxpapers.graph._emc import EMCState
from jaxpapers.graph._emc import slot_budget
from jaxpapers.graph._emc import init as emc_init
from jaxpapers.graph._emc import crystallize
from jaxpapers.graph._emc import memory_objective
from jaxpapers.graph._emc import evolve_prior
from jaxpapers.graph._emc import prototype_scores
from jaxpapers.graph._emc import predict as emc_predict
from jaxpapers.graph._emc import confident_nodes
from jaxpapers.graph._emc import update as emc_update
from jaxpapers.graph._emc import VARIANTS as EMC_VARIANTS
from jaxpapers.graph._emc import adapter as emc_adapter
from jaxpapers.graph._gcn import BN_EPSILON
from jaxpapers.graph._gcn import BN_MOMENTUM
from jaxpapers.graph._gcn import GCNParams
from jaxpapers.graph._gcn import BatchStats
from jaxpapers.graph._gcn import GCN
from jaxpapers.graph._gcn import init_gcn
from jaxpapers.graph._gcn import embed
from jaxpapers.graph._gcn import embed_with_graph_stats
from jaxpapers.graph._gcn import classify
from jaxpapers.graph._gcn import log_probs
from jaxpapers.graph._gcn import masked_accuracy
from jaxpapers.graph._gcn import SourceFit
from jaxpapers.graph._gcn import fit_source
from jaxpapers.graph._generative_memory import EDGE_HIDDEN
from jaxpapers.graph._generative_memory import EDGE_THRESHOLD
from jaxpapers.graph._generative_memory import GUMBEL_TEMPERATURE
from jaxpapers.graph._generative_memory import EDGE_PRIOR
from jaxpapers.graph._generative_memory import GenerativeMemoryOptions
from jaxpapers.graph._generative_memory import GeneratorParams
from jaxpapers.graph._generative_memory import MemoryGraph
from jaxpapers.graph._generative_memory import GenerativeMemoryState
from jaxpapers.graph._generative_memory import init_generator
from jaxpapers.graph._generative_memory import encode as generative_memory_encode
from jaxpapers.graph._generative_memory import edge_probabilities
from jaxpapers.graph._generative_memory import decode as generative_memory_decode
from jaxpapers.graph._generative_memory import update as generative_memory_update
from jaxpapers.graph._generative_memory import predict as generative_memory_predict
from jaxpapers.graph._generative_memory import generative_memory
from jaxpapers.graph._tta import AdaptationRun
from jaxpapers.graph._tta import adapt_sequence
from jaxpapers.graph._tta import evaluate_run
from jaxpapers.graph._tta import accuracy_matrix
from jaxpapers.graph._tta import continual_metrics
from jaxpapers.graph._tta import average_performance
from jaxpapers.graph._tta import forgetting
from jaxpapers.graph._tta import information_maximization
from jaxpapers.graph._tta import adam_l2
from jaxpapers.graph._graphs import batch
from jaxpapers.graph._graphs import check_graph
from jaxpapers.graph._graphs import gcn_propagate
from jaxpapers.graph._graphs import GraphsTuple
from jaxpapers.graph._graphs import make_graph
from jaxpapers.graph._graphs import node_features
from jaxpapers.graph._graphs import node_mask
from jaxpapers.graph._graphs import pad_graph
from jaxpapers.graph._graphs import pad_to_common_size
from jaxpapers.graph._graphs import symmetrize
from jaxpapers.graph._graphs import zero_out_padding
from jaxpapers.graph._tta import Adapter

__all__ = [
    "frozen",
    "TentState",
    "tent",
    "IMState",
    "im_step",
    "im_adaptation",
    "Domain",
    "DomainSequence",
    "csbm_sequence",
    "knn_edges",
    "digits_sequence",
    "PaddedDomains",
    "EMC_EVOLVE",
    "EMC_PREDICT",
    "EMC_ADAPT",
    "COVARIANCE_SHRINKAGE",
    "EMCOptions",
    "EMCState",
    "slot_budget",
    "emc_init",
    "crystallize",
    "memory_objective",
    "evolve_prior",
    "prototype_scores",
    "emc_predict",
    "confident_nodes",
    "emc_update",
    "EMC_VARIANTS",
    "emc_adapter",
    "BN_EPSILON",
    "BN_MOMENTUM",
    "GCNParams",
    "BatchStats",
    "GCN",
    "init_gcn",
    "embed",
    "embed_with_graph_stats",
    "classify",
    "log_probs",
    "masked_accuracy",
    "SourceFit",
    "fit_source",
    "AdaptationRun",
    "adapt_sequence",
    "evaluate_run",
    "accuracy_matrix",
    "continual_metrics",
    "average_performance",
    "forgetting",
    "information_maximization",
    "adam_l2",
    "batch",
    "check_graph",
    "gcn_propagate",
    "GraphsTuple",
    "make_graph",
    "node_features",
    "node_mask",
    "pad_graph",
    "pad_to_common_size",
    "symmetrize",
    "zero_out_padding",
    "Adapter",
    "EDGE_HIDDEN",
    "EDGE_THRESHOLD",
    "GUMBEL_TEMPERATURE",
    "EDGE_PRIOR",
    "GenerativeMemoryOptions",
    "GeneratorParams",
    "MemoryGraph",
    "GenerativeMemoryState",
    "init_generator",
    "generative_memory_encode",
    "edge_probabilities",
    "generative_memory_decode",
    "generative_memory_update",
    "generative_memory_predict",
    "generative_memory",
]

_deprecation.install(__name__)
