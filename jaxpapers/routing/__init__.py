"""Construction-based neural TSP solvers and their classical references.

:mod:`~jaxpapers.routing.lehd` holds the heavy-decoder model (greedy and
sampled construction, supervised partial-path training),
:mod:`~jaxpapers.routing.imitation` its supervised training,
:mod:`~jaxpapers.routing.tsp` instances and tour lengths,
:mod:`~jaxpapers.routing.exact` Held-Karp labels,
:mod:`~jaxpapers.routing.heuristics` nearest neighbour and 2-opt, and
:mod:`~jaxpapers.routing.lkh` LKH-3 labels through the optional ``elkai``.
"""

from jaxpapers.routing.exact import brute_force
from jaxpapers.routing.exact import held_karp
from jaxpapers.routing.heuristics import nearest_neighbour
from jaxpapers.routing.heuristics import two_opt
from jaxpapers.routing.imitation import greedy_gaps
from jaxpapers.routing.imitation import optimizer
from jaxpapers.routing.imitation import train_blocks
from jaxpapers.routing.imitation import train_step_flops
from jaxpapers.routing.imitation import train_steps
from jaxpapers.routing.imitation import TrainState
from jaxpapers.routing.lehd import decoder_parameter_count
from jaxpapers.routing.lehd import greedy_tours
from jaxpapers.routing.lehd import HeavyDecoder
from jaxpapers.routing.lehd import HeavyDecoderConfig
from jaxpapers.routing.lehd import imitation_loss
from jaxpapers.routing.lehd import layer_parameter_count
from jaxpapers.routing.lehd import parameter_count
from jaxpapers.routing.lehd import partial_paths
from jaxpapers.routing.lehd import PartialPaths
from jaxpapers.routing.lehd import ReZeroLayer
from jaxpapers.routing.lehd import sample_tours
from jaxpapers.routing.lkh import lkh_tours
from jaxpapers.routing.tsp import random_instances
from jaxpapers.routing.tsp import tour_length
from jaxpapers.routing.tsp import TourError
