"""jaxpapers.graph under Auto and Explicit meshes gives the unsharded numbers.

Node features are sharded along the node (batch) or the feature axis; the
graph structure (edge ids) is host data. gcn_propagate's case is in
tests/test_sharding_contract.py.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import graph

_rng = np.random.default_rng(0)
_f32 = lambda *shape: jnp.asarray(_rng.normal(size=shape), jnp.float32)
_SENDERS = np.arange(7, dtype=np.int32)
_RECEIVERS = np.arange(1, 8, dtype=np.int32)
_PADDED = graph.pad_graph(
    graph.make_graph(np.zeros((6, 4), np.float32), *graph.symmetrize(
        np.arange(5), np.arange(1, 6))), num_nodes=8, num_edges=12)


def _with_features(template, features):
  return template._replace(nodes={**template.nodes, "features": features})


def _batched(x1, x2):
  graphs = [graph.make_graph(np.zeros((8, 4), np.float32), _SENDERS,
                             _RECEIVERS, edge_weights=np.full(7, 0.5,
                                                              np.float32))]
  union = graph.batch([_with_features(graphs[0], x1),
                       _with_features(graphs[0], x2)])
  graph.check_graph(union, "union", feature_width=4)
  return (graph.node_features(union), graph.node_mask(union), union.senders,
          union.edges, graph.gcn_propagate(union, graph.node_features(union)))


def _zeroed(features):
  padded = graph.zero_out_padding(_with_features(_PADDED, features))
  return graph.node_features(padded), padded.edges


CASES = {
    "graph.batch+graph.check_graph+graph.node_features+graph.node_mask": (
        _batched, (_f32(8, 4), _f32(8, 4)), (jax.P(None, "model"),) * 2),
    "graph.zero_out_padding": (_zeroed, (_f32(8, 4),), (jax.P("data"),)),
}

NOT_SHARDED = {
    "graph.make_graph": "host-side constructor: edge ids become numpy and are"
                        " range-checked concretely (not traceable)",
    "graph.symmetrize": "host-side numpy edge lists (np.unique); takes no"
                        " device arrays",
    "graph.pad_graph": "host-side padding to static sizes (jraph's numpy"
                       " pad_with_graphs, concrete counts)",
    "graph.pad_to_common_size": "host-side padding of a list of graphs to"
                                " static sizes (concrete counts)",
}


@pytest.mark.parametrize("mode", ["Auto", "Explicit"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_sharded_inputs_give_the_unsharded_numbers(name, mode,
                                                   check_sharded_call):
  check_sharded_call(CASES[name], mode)
