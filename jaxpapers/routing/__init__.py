"""Construction-based neural TSP solvers and their classical references.

The heavy-decoder model (:class:`HeavyDecoder`: greedy and sampled
construction, :func:`greedy_tours`, :func:`sample_tours`), its supervised
partial-path training (:func:`train_steps`, :func:`imitation_loss`), instances
and tour lengths (:func:`random_instances`, :func:`tour_length`), Held-Karp
labels (:func:`held_karp`), nearest neighbour and 2-opt
(:func:`nearest_neighbour`, :func:`two_opt`), and LKH-3 labels through the
optional ``elkai`` (:func:`lkh_tours`).
"""

from jaxpapers import _deprecation
from jaxpapers.routing._exact import brute_force
from jaxpapers.routing._exact import held_karp
from jaxpapers.routing._heuristics import nearest_neighbour
from jaxpapers.routing._heuristics import two_opt
from jaxpapers.routing._imitation import greedy_gaps
from jaxpapers.routing._imitation import optimizer
from jaxpapers.routing._imitation import train_blocks
from jaxpapers.routing._imitation import train_step_flops
from jaxpapers.routing._imitation import train_steps
from jaxpapers.routing._imitation import TrainState
from jaxpapers.routing._lehd import decoder_parameter_count
from jaxpapers.routing._lehd import greedy_tours
from jaxpapers.routing._lehd import HeavyDecoder
from jaxpapers.routing._lehd import HeavyDecoderConfig
from jaxpapers.routing._lehd import imitation_loss
from jaxpapers.routing._lehd import layer_parameter_count
from jaxpapers.routing._lehd import parameter_count
from jaxpapers.routing._lehd import partial_paths
from jaxpapers.routing._lehd import PartialPaths
from jaxpapers.routing._lehd import ReZeroLayer
from jaxpapers.routing._lehd import sample_tours
from jaxpapers.routing._lkh import lkh_tours
from jaxpapers.routing._tsp import random_instances
from jaxpapers.routing._tsp import tour_length
from jaxpapers.routing._tsp import TourError
from jaxpapers.routing._exact import CHUNK_BYTES
from jaxpapers.routing._exact import MAX_CITIES
from jaxpapers.routing._tsp import distance_matrices

__all__ = [
    "CHUNK_BYTES",
    "MAX_CITIES",
    "distance_matrices",
    "brute_force",
    "held_karp",
    "nearest_neighbour",
    "two_opt",
    "greedy_gaps",
    "optimizer",
    "train_blocks",
    "train_step_flops",
    "train_steps",
    "TrainState",
    "decoder_parameter_count",
    "greedy_tours",
    "HeavyDecoder",
    "HeavyDecoderConfig",
    "imitation_loss",
    "layer_parameter_count",
    "parameter_count",
    "partial_paths",
    "PartialPaths",
    "ReZeroLayer",
    "sample_tours",
    "lkh_tours",
    "random_instances",
    "tour_length",
    "TourError",
]

_deprecation.install(__name__)
