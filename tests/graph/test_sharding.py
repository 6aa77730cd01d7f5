"""jaxpapers.graph under Auto and Explicit meshes gives the unsharded numbers.

Node arrays are sharded along "data" (nodes, and edges with them) and
feature or hidden axes along "model". tests/test_sharding_contract.py holds
a second gcn_propagate case, with only the feature axis sharded.
"""

import functools

import jax
import jax.numpy as jnp
import chex
import numpy as np
import optax
import pytest

from jaxpapers import graph
from jaxpapers.graph import _baselines as baselines
from jaxpapers.graph import _domains as domains
from jaxpapers.graph import _emc as emc
from jaxpapers.graph import _gcn as gcn
from jaxpapers.graph import _generative_memory as generative_memory
from jaxpapers.graph import _tta as tta
from tests import nnx_sharding
from tests import sharding_checks

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


# ---- the submodules: a small padded cSBM source and target ----------------

_SEQUENCE = domains.csbm_sequence(num_domains=2, num_nodes=24, num_classes=4,
                                  feature_width=8, seed=0)
_DOMAINS = domains.PaddedDomains({0: _SEQUENCE}, multiple=16)
_SOURCE, _TARGET = _DOMAINS.graphs[0]
_LABELS = jnp.asarray(_DOMAINS.node_array(_SEQUENCE.domains[0].labels))
_LABELLED = _DOMAINS.node_array(_SEQUENCE.domains[0].train_mask)
_MODEL = gcn.init_gcn(jax.random.key(0), 8, 4, hidden=8)
_EMC = emc.init(_SOURCE, _LABELS, model=_MODEL, key=jax.random.key(1),
                labelled=_LABELLED)
_MEMORY = generative_memory.generative_memory(epochs=1, capacity=2)
_MEMORY_STATE = _MEMORY.init(_MODEL, _SOURCE, None, None, jax.random.key(2))
_NUM_NODES = _DOMAINS.num_nodes


def _on_model(tree):
  """Specs: every float leaf's last axis along "model" where 4 divides it."""
  def spec(leaf):
    if (not jnp.issubdtype(jnp.result_type(leaf), jnp.floating)
        or jnp.ndim(leaf) == 0 or jnp.shape(leaf)[-1] % 4):
      return None
    return jax.P(*([None] * (jnp.ndim(leaf) - 1)), "model")
  return jax.tree.map(spec, tree)


# Nodes and edges along "data", node features along "model".
_GRAPH_SPECS = _TARGET._replace(
    nodes={"features": jax.P("data", "model"), "mask": jax.P("data")},
    edges=jax.P("data"), senders=jax.P("data"), receivers=jax.P("data"),
    n_node=None, n_edge=None)
_NODES = jax.P("data")
_NODES_BY_FEATURES = jax.P("data", "model")


def _adam(fn):
  """``fn`` run under standard promotion: optax's Adam mixes its int32 count
  into float math (see the standard_dtype_promotion fixture of
  tests/conftest.py)."""
  @functools.wraps(fn)
  def call(*args):
    with jax.numpy_dtype_promotion("standard"):
      return fn(*args)
  return call


def _propagated(graph_, x_NxD):
  return graph.gcn_propagate(graph_, x_NxD, edge_chunk=8)


def _gcn_forward(model, graph_, labels):
  h = gcn.embed(model, graph_)
  h_graph, stats = gcn.embed_with_graph_stats(model.params, graph_)
  logp = gcn.log_probs(model, graph_)
  return (h, h_graph, stats, gcn.classify(model.params.head, h), logp,
          gcn.masked_accuracy(logp, labels, graph.node_mask(graph_)))


def _adapted(method):
  """``method``'s state after the target and its prediction there, jitted."""
  @_adam
  def run(model, source, target):
    state = method.init(model, source, None, None, None)
    state = method.update(state, target)
    return state, method.predict(state, target)
  return run


@_adam
def _im_step(model, teacher, graph_):
  tx = tta.adam_l2(1e-2, 1e-4)
  return baselines.im_step(model, tx.init(model.params), teacher, graph_, tx,
                           marginal_weight=0.1, teacher_momentum=0.9)


@_adam
def _adam_l2_step(params, grads):
  tx = tta.adam_l2(1e-2, 1e-4)
  updates, state = tx.update(grads, tx.init(params), params)
  return optax.apply_updates(params, updates), state


def _emc_pieces(h_NxD, log_probs_NxC, mask_N, prior_MxD):
  slot_classes = _EMC.slot_classes
  slots_per_class = jnp.bincount(slot_classes, length=4)
  pseudo, selected = emc.confident_nodes(log_probs_NxC, mask_N,
                                         slots_per_class, 0.9, 0.2)
  slot_index = pseudo % slot_classes.shape[0]
  memory = emc.crystallize(h_NxD, slot_index, selected, prior_MxD, 0.1)
  return (pseudo, selected, memory,
          emc.memory_objective(memory, h_NxD, slot_index, selected,
                               prior_MxD, 0.1),
          emc.prototype_scores(h_NxD, memory, slot_classes, 4, 0.1),
          emc.evolve_prior(_EMC._replace(memory=memory, prior=prior_MxD)))


_EMC_TRANSITION = _EMC._replace(options=emc.EMCOptions(evolve="transition"))
_SLOTS_ON_MODEL = jax.tree.map(lambda _: None, _EMC_TRANSITION)._replace(
    memory=jax.P("model"), prior=jax.P("model"),
    previous_memory=jax.P("model"), slot_classes=jax.P("model"))


def _emc_step(state, target):
  state = emc.update(state, target)
  return state, emc.predict(state, target)


def _generator(key, x_MxF, target):
  generator = generative_memory.init_generator(key, 8)
  memory = generative_memory.encode(generator, target, 4)
  probs = generative_memory.edge_probabilities(generator, x_MxF)
  syn, syn_probs = generative_memory.decode(
      generator, x_MxF, jax.random.fold_in(key, 1), hard=True)
  return generator, memory, probs, syn.edges, syn_probs


def _without_normalised_biases(tree):
  """``tree`` less the biases that batch statistics normalise away.

  BatchNorm over the nodes cancels the bias before it (the generator's
  encoder and hidden edge layers, or fit_source's convolutions in train
  mode), so its gradient is
  rounding noise that Adam's first step scales up to +-lr: its value depends
  on the summation order, sharded or not, and nothing downstream depends on
  it.
  """
  drop = lambda layer: {k: v for k, v in layer.items() if k != "b"}
  if isinstance(tree, generative_memory.GenerativeMemoryState):
    generator = tree.generator
    return tree._replace(generator=generator._replace(
        encoder=drop(generator.encoder),
        edge_layers=(*map(drop, generator.edge_layers[:-1]),
                     generator.edge_layers[-1])))
  params = tree.model.params
  return tree._replace(model=tree.model._replace(params=params._replace(
      convs=tuple(drop(conv) for conv in params.convs))))


_MEMORIES_ON_DATA = jax.tree.map(lambda _: None, _MEMORY_STATE)._replace(
    memories=generative_memory.MemoryGraph(jax.P("data"), jax.P("data")))


@_adam
def _memory_step(state, target):
  state = generative_memory.update(state, target)
  # chex compares the key's data, not a key.
  compared = state._replace(key=jax.random.key_data(state.key))
  return (_without_normalised_biases(compared),
          generative_memory.predict(state, target))


CASES = {
    "graph.batch+graph.check_graph+graph.node_features+graph.node_mask": (
        _batched, (_f32(8, 4), _f32(8, 4)), (jax.P(None, "model"),) * 2),
    "graph.zero_out_padding": (_zeroed, (_f32(8, 4),), (jax.P("data"),)),
    "graph.gcn_propagate": (
        _propagated, (_TARGET, _f32(_NUM_NODES, 8)),
        (_GRAPH_SPECS, _NODES_BY_FEATURES)),
    "graph.init_gcn": (
        lambda key: gcn.init_gcn(key, 8, 4, hidden=8), (jax.random.key(3),),
        (None,)),
    "graph.embed+graph.embed_with_graph_stats+graph.classify"
    "+graph.log_probs+graph.masked_accuracy": (
        _gcn_forward, (_MODEL, _TARGET, _LABELS),
        (_on_model(_MODEL), _GRAPH_SPECS, _NODES)),
    # FSDP: the parameters sharded along the nodes' own mesh axis.
    "graph.classify+graph.embed_with_graph_stats": (
        _gcn_forward, (_MODEL, _TARGET, _LABELS),
        (nnx_sharding.fsdp_specs(_MODEL), _GRAPH_SPECS, _NODES)),
    "graph.frozen": (
        _adapted(baselines.frozen()), (_MODEL, _SOURCE, _TARGET),
        (_on_model(_MODEL), _GRAPH_SPECS, _GRAPH_SPECS)),
    "graph.tent": (
        _adapted(baselines.tent()), (_MODEL, _SOURCE, _TARGET),
        (_on_model(_MODEL), _GRAPH_SPECS, _GRAPH_SPECS)),
    "graph.im_adaptation": (
        _adapted(baselines.im_adaptation()), (_MODEL, _SOURCE, _TARGET),
        (_on_model(_MODEL), _GRAPH_SPECS, _GRAPH_SPECS)),
    "graph.im_step": (
        _im_step, (_MODEL, _MODEL.params, _TARGET),
        (_on_model(_MODEL), _on_model(_MODEL.params), _GRAPH_SPECS)),
    "graph.adam_l2": (
        _adam_l2_step,
        (_MODEL.params, jax.tree.map(lambda p: _f32(*p.shape), _MODEL.params)),
        (_on_model(_MODEL.params),) * 2),
    "graph.information_maximization": (
        lambda logits, mask: tta.information_maximization(logits, mask, 0.1),
        (_f32(_NUM_NODES, 4), graph.node_mask(_TARGET)),
        (_NODES_BY_FEATURES, _NODES)),
    "graph.confident_nodes+graph.crystallize"
    "+graph.memory_objective+graph.prototype_scores"
    "+graph.evolve_prior": (
        _emc_pieces,
        (_f32(_NUM_NODES, 8), jax.nn.log_softmax(3.0 * _f32(_NUM_NODES, 4)),
         graph.node_mask(_TARGET), _f32(*_EMC.memory.shape)),
        (_NODES_BY_FEATURES, _NODES_BY_FEATURES, _NODES,
         jax.P(None, "model"))),
    "graph.emc_update+graph.emc_predict": (
        _emc_step, (_EMC, _TARGET), (_on_model(_EMC), _GRAPH_SPECS)),
    "graph.emc_predict+graph.emc_update": (
        _emc_step, (_EMC, _TARGET), (nnx_sharding.fsdp_specs(_EMC), _GRAPH_SPECS)),
    # The slots over "model" and the nodes over "data": node-by-slot
    # products and masks broadcast the two, and the transition prior
    # multiplies slots by slots.
    "graph.evolve_prior+graph.emc_update+graph.emc_predict": (
        _emc_step, (_EMC_TRANSITION, _TARGET), (_SLOTS_ON_MODEL, _GRAPH_SPECS)),
    "graph.init_generator+graph.generative_memory_encode"
    "+graph.edge_probabilities"
    "+graph.generative_memory_decode": (
        _generator, (jax.random.key(4), _f32(4, 8), _TARGET),
        (None, jax.P(None, "model"), _GRAPH_SPECS)),
    # Adam's first step scales every gradient to about +-lr, so a weight
    # whose gradient (through the generator's gradient matching) is near its
    # rounding error moves by up to ~1e-5 with the summation order.
    "graph.generative_memory_update+graph.generative_memory_predict": (
        _memory_step, (_MEMORY_STATE, _TARGET),
        (_on_model(_MEMORY_STATE), _GRAPH_SPECS), {"rtol": 1e-3, "atol": 1e-4}),
    # The stored memories' leading axis, which the replay scans, over "data".
    "graph.generative_memory_predict+graph.generative_memory_update": (
        _memory_step, (_MEMORY_STATE, _TARGET),
        (_MEMORIES_ON_DATA, _GRAPH_SPECS), {"rtol": 1e-3, "atol": 1e-4}),
}


_HOST_HELPERS = ("host-side numpy on concrete arrays (not jittable); run on"
                 " sharded arrays by tests/graph/test_sharding.py::"
                 "test_host_side_helpers_read_sharded_arrays")
_HOST_RUNS = ("host-side: concrete label counts, validation or a loop of"
              " compiled steps (not jittable); run on sharded graphs by"
              " tests/graph/test_sharding.py::"
              "test_host_side_adaptation_runs_on_sharded_graphs")

NOT_SHARDED = {
    "graph.make_graph": "host-side constructor: edge ids become numpy and are"
                        " range-checked concretely (not traceable)",
    "graph.symmetrize": "host-side numpy edge lists (np.unique); takes no"
                        " device arrays",
    "graph.pad_graph": "host-side padding to static sizes (jraph's numpy"
                       " pad_with_graphs, concrete counts)",
    "graph.pad_to_common_size": "host-side padding of a list of graphs to"
                                " static sizes (concrete counts)",
    "graph.csbm_sequence": "takes Python numbers only; a host numpy"
                                   " generator of domain sequences",
    "graph.digits_sequence": "takes Python numbers only; a host numpy"
                                     " generator of domain sequences",
    "graph.EMCOptions": "a static config dataclass of Python numbers and"
                            " strings",
    "graph.GenerativeMemoryOptions": (
        "a static config dataclass of Python numbers"),
    "graph.knn_edges": _HOST_HELPERS,
    "graph.PaddedDomains": _HOST_HELPERS,
    "graph.slot_budget": _HOST_HELPERS,
    "graph.accuracy_matrix": _HOST_HELPERS,
    "graph.average_performance": _HOST_HELPERS,
    "graph.forgetting": _HOST_HELPERS,
    "graph.continual_metrics": _HOST_HELPERS,
    "graph.fit_source": _HOST_RUNS,
    "graph.emc_init": _HOST_RUNS,
    "graph.emc_adapter": _HOST_RUNS,
    "graph.generative_memory": _HOST_RUNS,
    "graph.adapt_sequence": _HOST_RUNS,
    "graph.evaluate_run": _HOST_RUNS,
}


# Also compared in value (which cases, and why: tests/README.md).
NUMERIC_CASES = {
    "graph.im_adaptation": ("Explicit",),
    "graph.im_step": ("Explicit",),
    "graph.generative_memory_predict+graph.generative_memory_update":
        ("Explicit",),
    "graph.generative_memory_update+graph.generative_memory_predict":
        ("Explicit",),
    "graph.zero_out_padding": ("Auto",),
}
# Numeric cases of 1.5 s or more: the slow suite, which CI runs.
SLOW_CASES = {
    "graph.im_adaptation",
    "graph.generative_memory_predict+graph.generative_memory_update",
    "graph.generative_memory_update+graph.generative_memory_predict",
}


(test_sharded_call_traces_like_the_unsharded_call,
 test_sharded_inputs_give_the_unsharded_numbers) = (
     sharding_checks.contract_tests(CASES, NUMERIC_CASES, SLOW_CASES))


def _place(tree, specs):
  """``tree``'s leaves put by ``specs`` (None: left as they are)."""
  return jax.tree.map(
      lambda spec, leaf: leaf if spec is None else jax.device_put(leaf, spec),
      specs, tree,
      is_leaf=lambda spec: spec is None or isinstance(spec, jax.P))


def _assert_close(got, expected):
  """Trees equal in structure, shape and dtype, close in value (keys too)."""
  as_data = lambda tree: jax.tree.map(
      lambda x: np.asarray(jax.random.key_data(x)
                           if jnp.issubdtype(jnp.result_type(x),
                                             jax.dtypes.prng_key) else x),
      tree)
  got, expected = as_data(got), as_data(expected)
  chex.assert_trees_all_equal_shapes_and_dtypes(got, expected)
  chex.assert_trees_all_close(got, expected, rtol=1e-5, atol=1e-6)


def _host_helpers(place):
  """The host-side helpers of domains, emc and tta on ``place``d arrays."""
  features = place(jnp.asarray(_SEQUENCE.domains[0].graph.nodes["features"]),
                   _NODES_BY_FEATURES)
  sequence = _SEQUENCE._replace(domains=[
      d._replace(graph=place(d.graph, _GRAPH_SPECS._replace(
          nodes={"features": _NODES_BY_FEATURES, "mask": _NODES})),
                 labels=place(jnp.asarray(d.labels), _NODES))
      for d in _SEQUENCE.domains])
  padded = domains.PaddedDomains({0: sequence}, multiple=16)
  matrix = np.tril(np.linspace(0.3, 0.9, 16).reshape(4, 4))
  matrix[np.triu_indices(4, 1)] = np.nan
  full = place(jnp.asarray(matrix), _NODES_BY_FEATURES)
  return (domains.knn_edges(features, 3), padded.graphs,
          padded.node_array(sequence.domains[1].labels),
          emc.slot_budget(place(jnp.asarray([45, 35, 20, 10]), _NODES), 140,
                          0.05),
          tta.accuracy_matrix(list(place(jnp.asarray(np.nan_to_num(matrix)),
                                         _NODES_BY_FEATURES))),
          tta.continual_metrics(full), tta.average_performance(full, 2),
          tta.forgetting(full))


@pytest.mark.parametrize("mode", ["Auto", "Explicit"])
def test_host_side_helpers_read_sharded_arrays(mode, contract_mesh):
  expected = _host_helpers(lambda tree, specs: tree)
  with jax.set_mesh(contract_mesh(mode)):
    got = _host_helpers(_place)
  _assert_close(got, expected)


@_adam
def _host_side_runs(place):
  """fit_source, an EMC run (and its evaluate_run matrix) and a generative
  memory's init, ``place``d."""
  source = place(_SOURCE, _GRAPH_SPECS)
  target = place(_TARGET, _GRAPH_SPECS)
  labels = place(_LABELS, _NODES)
  labelled = place(jnp.asarray(_LABELLED), _NODES)
  # One epoch: the running statistics of a second one would see the noisy
  # biases (see _without_normalised_biases).
  fit = gcn.fit_source(jax.random.key(5), source, labels, labelled, labelled,
                       num_classes=4, hidden=8, epochs=1)
  state = emc.init(source, labels, model=_MODEL, key=jax.random.key(6),
                   labelled=labelled)
  run = tta.adapt_sequence(emc.adapter(predict="coral"), _MODEL,
                           [source, target], labels, labelled,
                           jax.random.key(7))
  # The generative memory's update has its own case in CASES.
  memory = generative_memory.generative_memory(capacity=2).init(
      _MODEL, source, labels, labelled, jax.random.key(8))
  matrix = tta.evaluate_run(run, gcn.masked_accuracy, [labels] * 2,
                            [labelled] * 2, repeats=1)["R"]
  return (_without_normalised_biases(fit), state, run.states, memory,
          np.asarray(matrix))


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["Auto", "Explicit"])
def test_host_side_adaptation_runs_on_sharded_graphs(mode, contract_mesh):
  expected = _host_side_runs(lambda tree, specs: tree)
  with jax.set_mesh(contract_mesh(mode)):
    got = _host_side_runs(_place)
  _assert_close(got, expected)
