"""jaxpapers.graph: a table of misuse, each a named error, and edge-free graphs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import graph
from jaxpapers.graph import emc


def _path(num_nodes=4, weights=None):
  senders = np.arange(num_nodes - 1)
  return graph.make_graph(np.eye(num_nodes, dtype=np.float32), senders,
                          senders + 1, edge_weights=weights)


MISUSE = [
    # Fewer feature rows than nodes used to be clamped by the gather.
    (lambda: graph.gcn_propagate(_path(), jnp.ones((3, 2))), ValueError,
     "x_NxD must have one row per node of the graph, shape \\(4, D\\)"),
    (lambda: graph.gcn_propagate(_path(), jnp.ones((4,))), ValueError,
     "one row per node"),
    (lambda: graph.gcn_propagate(_path(weights=np.array([1.0, -2.0, 1.0],
                                                        np.float32)),
                                 jnp.ones((4, 2))),
     ValueError, "negative edge weights"),
    (lambda: emc.EMCOptions(confidence=1.5), ValueError,
     r"confidence must lie in \[0, 1\]"),
    (lambda: emc.adapter(beta=-0.1), ValueError, r"beta must lie in \[0, 1\]"),
    (lambda: graph.make_graph(np.ones((3, 2)), [0, 3], [1, 2]), ValueError,
     r"index nodes in \[0, 3\)"),
    # Integer features would be cast by the first float operation downstream.
    (lambda: graph.make_graph(np.eye(3, dtype=np.int32), [0], [1]), TypeError,
     "features must be floating-point node features, got dtype int32"),
    (lambda: graph.symmetrize(np.arange(3), np.arange(2)), ValueError,
     "senders and receivers must be 1-D and of equal length"),
    (lambda: graph.batch([]), ValueError, "graphs is empty"),
    (lambda: graph.batch([_path(), graph.make_graph(np.ones((2, 3), np.float32),
                                                    [0], [1])]),
     ValueError, r"graphs\[1\] has 3 node features per node, but the model"
     " expects 4"),
    (lambda: graph.pad_to_common_size([]), ValueError, "graphs is empty"),
    (lambda: graph.pad_to_common_size([_path()], multiple=0), ValueError,
     "multiple must be a positive int"),
    (lambda: graph.pad_graph(_path(), num_nodes=4, num_edges=3), ValueError,
     "num_nodes=4 must exceed the 4 real nodes"),
    (lambda: graph.zero_out_padding(_path()._replace(nodes=np.ones((4, 4)))),
     ValueError, "graph.nodes must be a dict"),
    (lambda: graph.gcn_propagate(_path(), jnp.ones((4, 2)), edge_chunk=2.5),
     ValueError, "edge_chunk must be an int >= 1"),
    (lambda: graph.check_graph(_path(), "g", feature_width=3), ValueError,
     "g has 4 node features per node, but the model expects 3"),
]


@pytest.mark.parametrize("index", range(len(MISUSE)))
def test_misuse_is_a_named_error(index):
  call, error, message = MISUSE[index]
  with pytest.raises(error, match=message):
    call()


def test_a_graph_without_edges_leaves_every_node_isolated():
  empty = graph.make_graph(np.ones((3, 2), np.float32), np.zeros(0, np.int32),
                           np.zeros(0, np.int32))
  x = jnp.arange(6.0).reshape(3, 2)
  np.testing.assert_array_equal(graph.gcn_propagate(empty, x), x)
  np.testing.assert_array_equal(jax.jit(graph.gcn_propagate)(empty, x), x)


def test_propagation_against_the_dense_normalised_adjacency():
  weights = np.array([1.0, 2.0, 0.5], np.float32)
  g = _path(weights=weights)
  x = jnp.asarray(np.random.default_rng(0).normal(size=(4, 3)), jnp.float32)
  adjacency = np.eye(4)
  adjacency[np.arange(1, 4), np.arange(3)] = weights  # receivers aggregate
  inv_sqrt = 1 / np.sqrt(adjacency.sum(axis=1))
  expected = inv_sqrt[:, None] * adjacency * inv_sqrt[None, :] @ np.asarray(x)
  np.testing.assert_allclose(graph.gcn_propagate(g, x), expected, rtol=1e-5)
