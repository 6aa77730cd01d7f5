"""The jraph subset jaxpapers.graph relies on, and our layer over it."""

import jax
import jax.numpy as jnp
import jraph
import numpy as np
import pytest

from jaxpapers import graph as graph_lib
from jaxpapers.graph import _graphs as graphs


def _random_graph(seed, num_nodes=7, num_features=3, num_edges=10, weighted=False):
  rng = np.random.default_rng(seed)
  senders, receivers = graphs.symmetrize(rng.integers(0, num_nodes, num_edges),
                                         rng.integers(0, num_nodes, num_edges))
  weights = rng.uniform(0.5, 2.0, senders.size) if weighted else None
  return graphs.make_graph(rng.normal(size=(num_nodes, num_features)).astype(np.float32),
                           senders, receivers, edge_weights=weights)


def _dense_gcn_reference(graph):
  n = graph.nodes["features"].shape[0]
  adj = np.zeros((n, n))
  weights = np.ones(graph.senders.size) if graph.edges is None else graph.edges
  np.add.at(adj, (graph.receivers, graph.senders), weights)
  adj += np.eye(n)
  inv_sqrt = 1 / np.sqrt(adj.sum(1))
  return (inv_sqrt[:, None] * adj * inv_sqrt[None, :]) @ graph.nodes["features"]


def test_jraph_subset_we_rely_on():
  a, b = _random_graph(0), _random_graph(1, num_nodes=5)
  batched = jraph.batch([a, b])
  assert batched.n_node.tolist() == [7, 5]
  assert batched.senders.max() >= 7  # b's edges are offset by a's nodes
  padded = jraph.pad_with_graphs(batched, n_node=16, n_edge=64, n_graph=3)
  assert padded.nodes["features"].shape == (16, 3)
  assert padded.senders.shape == (64,)
  mask = np.asarray(padded.nodes["mask"])
  assert mask.tolist() == [True] * 12 + [False] * 4
  assert not np.any(padded.nodes["features"][12:])
  # Padding edges join padding nodes only.
  assert np.all(padded.senders[batched.senders.size:] >= 12)
  assert np.all(padded.receivers[batched.senders.size:] >= 12)
  # GraphsTuple is a pytree that jit accepts.
  total = jax.jit(lambda g: jnp.sum(g.nodes["features"]))(padded)
  np.testing.assert_allclose(total, np.sum(batched.nodes["features"]), rtol=1e-5)


def test_jraph_zero_out_padding_is_broken_on_modern_jax():
  """Why graphs.zero_out_padding exists; if this starts passing, jraph was fixed."""
  padded = jraph.pad_with_graphs(_random_graph(0), 8, 64)
  with pytest.raises(AttributeError, match="tree_map"):
    jraph.zero_out_padding(padded)


def test_zero_out_padding_zeroes_padding_only():
  graph = _random_graph(0, weighted=True)
  padded = jraph.pad_with_graphs(graph, 12, 40)
  padded = padded._replace(
      nodes={**padded.nodes, "features": padded.nodes["features"] + 5.0},
      edges=padded.edges + 1.0)
  out = jax.jit(graphs.zero_out_padding)(padded)
  np.testing.assert_allclose(out.nodes["features"][:7], graph.nodes["features"] + 5)
  assert not np.any(out.nodes["features"][7:])
  np.testing.assert_allclose(out.edges[:graph.senders.size], graph.edges + 1)
  assert not np.any(out.edges[graph.senders.size:])


@pytest.mark.parametrize("weighted,edge_chunk",
                         [(False, graphs.EDGE_CHUNK), (True, graphs.EDGE_CHUNK),
                          (True, 1), (True, 7)])
def test_gcn_propagate_matches_dense_reference_padded_or_not(weighted,
                                                             edge_chunk):
  graph = _random_graph(3, weighted=weighted)
  expected = _dense_gcn_reference(graph)
  propagate = jax.jit(lambda g: graphs.gcn_propagate(g, g.nodes["features"],
                                                     edge_chunk=edge_chunk))
  np.testing.assert_allclose(propagate(graph), expected, rtol=1e-5, atol=1e-6)
  padded = graphs.pad_graph(graph, 13, 50)
  np.testing.assert_allclose(propagate(padded)[:7], expected, rtol=1e-5, atol=1e-6)


def test_gcn_propagate_rejects_empty_edge_chunks():
  with pytest.raises(ValueError, match="edge_chunk"):
    graphs.gcn_propagate(_random_graph(0), _random_graph(0).nodes["features"],
                         edge_chunk=0)


def test_pad_to_common_size_gives_one_shape():
  graphs_ = graphs.pad_to_common_size([_random_graph(0), _random_graph(1, num_nodes=9)],
                                      multiple=8)
  shapes = {(g.nodes["features"].shape, g.senders.shape, g.n_node.shape)
            for g in graphs_}
  assert shapes == {((16, 3), (graphs_[0].senders.shape[0],), (2,))}
  assert [int(graphs.num_real_nodes(g)) for g in graphs_] == [7, 9]


def test_batch_keeps_masks_of_padded_members():
  padded = graphs.pad_graph(_random_graph(0), 10, 30)
  both = graph_lib.batch([padded, _random_graph(1, num_nodes=4)])
  assert np.asarray(graphs.node_mask(both)).tolist() == (
      [True] * 7 + [False] * 3 + [True] * 4)


def test_symmetrize_gives_both_directions_once():
  s, r = graphs.symmetrize(np.array([0, 1, 2, 2, 3]), np.array([1, 0, 2, 3, 0]))
  pairs = set(zip(s.tolist(), r.tolist()))
  assert pairs == {(0, 1), (1, 0), (2, 3), (3, 2), (0, 3), (3, 0)}
  assert len(pairs) == s.size


@pytest.mark.parametrize("bad,match", [
    (lambda g: g._replace(nodes=g.nodes["features"]), "must be a dict"),
    (lambda g: g._replace(nodes={"features": np.zeros((0, 3), np.float32),
                                 "mask": np.zeros((0,), bool)}), "is empty"),
    (lambda g: g._replace(nodes={"features": np.zeros((7,), np.float32),
                                 "mask": g.nodes["mask"]}), r"\(num_nodes, num_features\)"),
    (lambda g: g, "expects 4"),
])
def test_check_graph_names_the_problem(bad, match):
  with pytest.raises(ValueError, match=match):
    graphs.check_graph(bad(_random_graph(0)), "graph", feature_width=4)


def test_make_and_pad_errors():
  with pytest.raises(ValueError, match="senders and receivers must index"):
    graphs.make_graph(np.zeros((3, 2)), np.array([0]), np.array([3]))
  with pytest.raises(ValueError, match="edge_weights must have shape"):
    graphs.make_graph(np.zeros((3, 2)), np.array([0]), np.array([1]),
                      edge_weights=np.ones(2))
  with pytest.raises(ValueError, match="num_nodes=7 must exceed"):
    graphs.pad_graph(_random_graph(0), 7, 100)
  with pytest.raises(ValueError, match="num_edges=1 is below"):
    graphs.pad_graph(_random_graph(0), 8, 1)
