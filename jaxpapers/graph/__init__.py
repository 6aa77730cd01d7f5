"""Graph learning on jraph's GraphsTuple, and continual test-time graph adaptation.

* :mod:`jaxpapers.graph.graphs` -- the thin, tested layer over jraph
  (padding to static shapes, masks, GCN propagation).
* :mod:`jaxpapers.graph.gcn` -- the GCN source model (pure functions).
* :mod:`jaxpapers.graph.emc` -- EMC, training-free closed-form memory
  crystallisation (a reconstruction; see its docstring).
* :mod:`jaxpapers.graph.baselines`, :mod:`jaxpapers.graph.generative_memory`
  -- frozen, Tent, direct (IM) adaptation, and a GCAL-style generative memory.
* :mod:`jaxpapers.graph.domains` -- drifting domain sequences (contextual SBM,
  digits k-NN graphs).
* :mod:`jaxpapers.graph.tta` -- the :class:`Adapter` protocol, a method's run
  through a sequence (:func:`~jaxpapers.graph.tta.adapt_sequence`), the
  accuracy-matrix metrics (average performance, forgetting) and a run's
  evaluation with its update costs (:func:`~jaxpapers.graph.tta.evaluate_run`).
"""

from jaxpapers.graph import baselines
from jaxpapers.graph import domains
from jaxpapers.graph import emc
from jaxpapers.graph import gcn
from jaxpapers.graph import generative_memory
from jaxpapers.graph import tta
from jaxpapers.graph.graphs import batch
from jaxpapers.graph.graphs import check_graph
from jaxpapers.graph.graphs import gcn_propagate
from jaxpapers.graph.graphs import GraphsTuple
from jaxpapers.graph.graphs import make_graph
from jaxpapers.graph.graphs import node_features
from jaxpapers.graph.graphs import node_mask
from jaxpapers.graph.graphs import pad_graph
from jaxpapers.graph.graphs import pad_to_common_size
from jaxpapers.graph.graphs import symmetrize
from jaxpapers.graph.graphs import zero_out_padding
from jaxpapers.graph.tta import Adapter
