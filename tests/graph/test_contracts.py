"""jaxpapers.graph: a table of misuse, each a named error, and edge-free graphs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import graph
from jaxpapers.graph import _baselines as baselines
from jaxpapers.graph import _domains as domains
from jaxpapers.graph import _emc as emc
from jaxpapers.graph import _gcn as gcn
from jaxpapers.graph import _generative_memory as generative_memory
from jaxpapers.graph import _graphs as graphs
from jaxpapers.graph import _tta as tta


def _path(num_nodes=4, weights=None):
  senders = np.arange(num_nodes - 1)
  return graph.make_graph(np.eye(num_nodes, dtype=np.float32), senders,
                          senders + 1, edge_weights=weights)


def _with_nan_feature():
  features = np.eye(4, dtype=np.float32)
  features[2, 1] = np.nan
  return graph.make_graph(features, [0, 1, 2], [1, 2, 3])


_LABELS = np.array([0, 1, 0, 1], np.int32)
_ALL = np.ones(4, bool)
# A numpy GCN of feature width 4: enough for the checks that run before any
# jax computation (nothing here compiles).
_MODEL = gcn.GCN(gcn.GCNParams(convs=({"w": np.zeros((4, 2), np.float32)},),
                               norms=(), head={"w": np.zeros((2, 2), np.float32)}),
                 gcn.BatchStats((), ()))
_STATE = emc.EMCState(*[np.zeros((2, 2), np.float32)] * 3,
                      np.array([0, 1], np.int32), np.zeros(2, np.float32),
                      np.eye(2, dtype=np.float32), _MODEL, emc.EMCOptions())
_H, _PRIOR = np.ones((3, 2), np.float32), np.zeros((2, 2), np.float32)
_SEQUENCE = domains.csbm_sequence(num_domains=2, num_nodes=20, num_classes=2,
                                  feature_width=2)


def _fit(labels=_LABELS, source=None, **kwargs):
  return gcn.fit_source(jax.random.key(0), _path() if source is None else source,
                        labels, _ALL, _ALL, **{"num_classes": 2, "hidden": 2,
                                               "epochs": 1, **kwargs})


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
    # Issue 35: a label >= num_classes used to drop out of the source fit's
    # loss silently (traced labels give a NaN fit, test_gcn.py).
    (lambda: _fit(labels=np.array([0, 1, 2, 1])), ValueError,
     r"labels of training and validation nodes must lie in \[0, 2\)"
     r" \(num_classes\); node 2 has label 2"),
    (lambda: _fit(labels=_LABELS.astype(np.float32)), TypeError,
     "labels must be integer classes"),
    (lambda: _fit(source=_with_nan_feature()), ValueError,
     r"graph has non-finite \(NaN or inf\) node features at 1 real node"),
    (lambda: _fit(learning_rate=float("nan")), ValueError,
     "learning_rate must be >= 0 and finite; got nan"),
    (lambda: _fit(epochs=0), ValueError, "epochs must be an int >= 1"),
    (lambda: _fit(dropout_rate=1.0), ValueError,
     r"dropout_rate must lie in \[0, 1\)"),
    (lambda: gcn.init_gcn(jax.random.key(0), 4, 2, hidden=2.5), ValueError,
     "hidden must be an int >= 1; got 2.5"),
    (lambda: gcn.classify(_MODEL.params.head, np.ones((3, 5))), ValueError,
     r"h_NxD must be \(N, 2\)"),
    (lambda: gcn.masked_accuracy(np.zeros((4, 2)), np.zeros(3, np.int32), _ALL),
     ValueError, "masked_accuracy needs log_probs_NxC"),
    # Issue 35: a NaN node is never confident, so EMC's memory used to be a
    # plausible update without it (traced features give a NaN memory,
    # test_emc.py).
    (lambda: emc.update(_STATE, _with_nan_feature()), ValueError,
     r"graph has non-finite \(NaN or inf\) node features at 1 real node\(s\),"
     " first node 2"),
    (lambda: emc.init(_with_nan_feature(), _LABELS, model=_MODEL,
                      key=jax.random.key(0)), ValueError,
     "source_graph has non-finite"),
    (lambda: emc.init(_path(), _LABELS.astype(np.float32), model=_MODEL,
                      key=jax.random.key(0)), TypeError,
     "labels must be integer classes"),
    (lambda: emc.init(_path(), _LABELS, model=_MODEL, key=jax.random.key(0),
                      labelled=np.ones(3, bool)), ValueError,
     r"labelled must have shape \(4,\)"),
    (lambda: emc.init(_path(), _LABELS, model=_MODEL, key=jax.random.key(0),
                      memory_ratio=float("nan")), ValueError,
     "memory_ratio must be >= 0 and finite"),
    # NaN fails every comparison: "lam < 0" used to accept it.
    (lambda: emc.EMCOptions(lam=float("nan")), ValueError,
     "lam must be >= 0 and finite; got nan"),
    (lambda: emc.EMCOptions(tau=float("inf")), ValueError, "tau must be > 0 and finite"),
    (lambda: emc.EMCOptions(gamma=-1.0), ValueError, "gamma must be >= 0 and finite"),
    (lambda: emc.EMCOptions(rho=float("nan")), ValueError, "rho must be >= 0 and finite"),
    (lambda: emc.EMCOptions(refine_passes=1.5), ValueError,
     "refine_passes must be an int >= 0"),
    (lambda: emc.EMCOptions(im_learning_rate=float("nan")), ValueError,
     "im_learning_rate must be >= 0 and finite"),
    (lambda: emc.slot_budget(np.array([3, 0]), 10, 0.05), ValueError,
     "class_counts must be a non-empty 1-D array of integer counts >= 1"),
    (lambda: emc.slot_budget(np.array([], np.int64), 10, 0.05), ValueError,
     "class_counts must be a non-empty"),
    # A slot id >= m used to be dropped by the segment sum (traced: NaN).
    (lambda: emc.crystallize(_H, np.array([0, 1, 2]), np.ones(3, bool),
                             _PRIOR, 0.1), ValueError,
     r"slot_index_N of selected nodes must lie in \[0, 2\)"),
    (lambda: emc.crystallize(_H, np.array([0, 1]), np.ones(3, bool), _PRIOR,
                             0.1), ValueError, "need h_NxD"),
    (lambda: emc.crystallize(_H, np.array([0.0, 1.0, 1.0]), np.ones(3, bool),
                             _PRIOR, 0.1), TypeError,
     "slot_index_N must be integer slot ids"),
    (lambda: emc.memory_objective(_PRIOR, _H, np.array([0, 1, 1]),
                                  np.ones(3, bool), _PRIOR, float("nan")),
     ValueError, "lam must be >= 0 and finite"),
    (lambda: emc.prototype_scores(_H, _PRIOR, np.array([0, 5]), 2, 0.1),
     ValueError, r"slot_classes_M must be integer classes in \[0, 2\)"),
    (lambda: emc.prototype_scores(_H, _PRIOR, np.array([0, 1]), 2, 0.0),
     ValueError, "tau must be > 0 and finite"),
    (lambda: emc.confident_nodes(np.zeros((3, 2)), np.ones(3, bool),
                                 np.ones(2, np.int32), float("nan"), 0.2),
     ValueError, "confidence must lie in"),
    (lambda: emc.confident_nodes(np.zeros((3, 2)), np.ones(4, bool),
                                 np.ones(2, np.int32), 0.9, 0.2),
     ValueError, "need log_probs_NxC"),
    # Negative step counts used to run no adaptation at all.
    (lambda: baselines.tent(steps=-1), ValueError, "steps must be an int >= 0"),
    (lambda: baselines.tent(learning_rate=float("nan")), ValueError,
     "learning_rate must be >= 0 and finite"),
    (lambda: baselines.im_adaptation(epochs=-1), ValueError,
     "epochs must be an int >= 0"),
    (lambda: baselines.im_adaptation(teacher_momentum=2.0), ValueError,
     r"teacher_momentum must lie in \[0, 1\]"),
    (lambda: generative_memory.generative_memory(epochs=-1), ValueError,
     "epochs must be an int >= 0"),
    (lambda: generative_memory.generative_memory(memory_ratio=float("nan")),
     ValueError, "memory_ratio must be >= 0 and finite"),
    (lambda: generative_memory.GenerativeMemoryOptions(memory_size=2,
                                                       capacity=0),
     ValueError, "capacity must be an int >= 1"),
    (lambda: generative_memory.init_generator(jax.random.key(0), 0), ValueError,
     "feature_width must be an int >= 1"),
    (lambda: tta.accuracy_matrix([]), ValueError, "rows is empty"),
    (lambda: tta.accuracy_matrix([[0.5, 0.5]]), ValueError,
     "rows\\[0\\] must be 1-D with at most 1 accuracies"),
    (lambda: tta.average_performance(np.ones((2, 2)), 5), ValueError,
     r"step must be an int in \[0, 2\)"),
    (lambda: tta.forgetting(np.ones(3)), ValueError,
     r"accuracy_matrix must be a non-empty square \(T, T\) matrix"),
    (lambda: tta.continual_metrics(np.zeros((0, 0))), ValueError,
     "accuracy_matrix must be a non-empty square"),
    (lambda: tta.information_maximization(np.ones((4, 3)), np.ones(3, bool)),
     ValueError, "information_maximization needs logits_NxC"),
    (lambda: tta.adam_l2(float("nan"), 0.0), ValueError,
     "learning_rate must be >= 0 and finite"),
    (lambda: tta.adapt_sequence(baselines.frozen(), _MODEL, [], None, None,
                                jax.random.key(0)), ValueError,
     "graphs is empty"),
    (lambda: tta.evaluate_run(tta.AdaptationRun(None, [_path()], [], [], []),
                              None, [_LABELS], [_ALL]), ValueError,
     "evaluate_run needs the source and at least one target"),
    (lambda: tta.evaluate_run(tta.AdaptationRun(None, [_path()] * 2, [], [],
                                                []), None, [_LABELS], [_ALL]),
     ValueError, r"labels and masks must hold one array per domain \(2\)"),
    (lambda: tta.evaluate_run(tta.AdaptationRun(None, [_path()] * 2, [], [],
                                                []), None, [_LABELS] * 2,
                              [_ALL] * 2, repeats=0), ValueError,
     "repeats must be an int >= 1"),
    (lambda: domains.csbm_sequence(p_in=2.0), ValueError,
     r"p_in must lie in \[0, 1\]"),
    (lambda: domains.csbm_sequence(feature_width=1), ValueError,
     "feature_width must be an int >= 2"),
    (lambda: domains.csbm_sequence(num_classes=0), ValueError,
     "num_classes must be an int >= 1"),
    (lambda: domains.csbm_sequence(rotation_deg=float("nan")), ValueError,
     "rotation_deg must be finite"),
    (lambda: domains.digits_sequence(noise=-1.0), ValueError,
     "noise must be >= 0 and finite"),
    (lambda: domains.knn_edges(np.ones((5, 2)), 5), ValueError,
     "k=5 must be at most N - 1 = 4"),
    (lambda: domains.knn_edges(np.array([[0.0], [np.nan], [1.0]]), 1),
     ValueError, "features holds NaN or inf"),
    (lambda: domains.PaddedDomains({}, multiple=16), ValueError,
     "sequences holds no domain"),
    (lambda: domains.PaddedDomains({0: _SEQUENCE}, multiple=16).node_array(
        np.ones(40)), ValueError, "values must be 1-D with fewer than 32"),
    (lambda: domains.PaddedDomains({0: _SEQUENCE}, multiple=16).node_arrays(
        1, "labels"), ValueError, "seed 1 is not one of the padded sequences"),
    (lambda: domains.PaddedDomains({0: _SEQUENCE}, multiple=16).node_arrays(
        0, "graph"), ValueError, "field must be one of"),
    # 1.9 used to be truncated to node 1.
    (lambda: graph.make_graph(np.ones((3, 2), np.float32), [1.9], [1]),
     TypeError, "senders must be integer node ids"),
    (lambda: graph.make_graph(np.ones((3, 2), np.float32), [0], [1],
                              edge_weights=[np.nan]), ValueError,
     "edge_weights must be finite"),
    (lambda: graph.symmetrize(np.array([0.5]), np.array([1.0])), TypeError,
     "senders must be integer node ids"),
    (lambda: graph.pad_graph(_path(), 40.5, 8), ValueError,
     "num_nodes must be an int >= 0"),
    (lambda: graphs.padded_size(10, 0), ValueError,
     "multiple must be an int >= 1"),
    (lambda: graphs.ceil_fraction(float("nan"), 10), ValueError,
     "fraction must be >= 0 and finite"),
    (lambda: graphs.masked_mean(np.ones((4, 3)), np.ones(3, bool)), ValueError,
     "masked_mean needs x_NxD"),
    (lambda: generative_memory.encode(
        generative_memory.GeneratorParams({"w": np.zeros((4, 8))}, {}, None, (),
                                          ()), _path(), 5), ValueError,
     "memory_size=5 exceeds the graph's 4 real nodes"),
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
