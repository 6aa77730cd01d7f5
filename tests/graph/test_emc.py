"""EMC: the closed form, invariances, padding, the state evolution and named errors."""

import jax
import jax.numpy as jnp
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import numpy as np
import pytest

from jaxpapers.graph import _domains as domains
from jaxpapers.graph import _emc as emc
from jaxpapers.graph import _gcn as gcn
from jaxpapers.graph import _graphs as graphs

WIDTH = 8
# Eager calls would compile every primitive separately.
embed = jax.jit(gcn.embed)
crystallize = jax.jit(emc.crystallize)
evolve_prior = jax.jit(emc.evolve_prior)


@pytest.fixture(scope="module")
def setup():
  """A small drifting CSBM and a GCN whose BatchNorm fits the source graph."""
  seq = domains.csbm_sequence(num_domains=3, num_nodes=80, feature_width=WIDTH,
                              p_in=0.1, p_out=0.02, rotation_deg=30, seed=0)
  source = seq.domains[0]
  model = gcn.init_gcn(jax.random.key(0), WIDTH, seq.num_classes, hidden=16)
  _, stats = jax.jit(gcn.embed_with_graph_stats)(model.params, source.graph)
  # A sharper head so that some nodes pass the 0.9 confidence threshold.
  head = {"w": 6.0 * model.params.head["w"], "b": model.params.head["b"]}
  model = gcn.GCN(model.params._replace(head=head), stats)
  state = emc.init(source.graph, source.labels, model=model,
                   key=jax.random.key(1), labelled=source.train_mask)
  return seq, model, state


def _padded(seq):
  return graphs.pad_to_common_size([d.graph for d in seq.domains], multiple=32)


def _permute(graph, perm):
  inverse = np.argsort(perm)
  return graphs.make_graph(np.asarray(graph.nodes["features"])[perm],
                           inverse[graph.senders], inverse[graph.receivers])


def test_closed_form_equals_gradient_descent_minimiser():
  rng = np.random.default_rng(0)
  num_nodes, num_slots, dim, lam = 60, 7, 5, 0.3
  h = jnp.asarray(rng.normal(size=(num_nodes, dim)), jnp.float32)
  slot_index = jnp.asarray(rng.integers(0, num_slots - 1, num_nodes), jnp.int32)
  selected = jnp.asarray(rng.random(num_nodes) < 0.7)
  prior = jnp.asarray(rng.normal(size=(num_slots, dim)), jnp.float32)
  closed = crystallize(h, slot_index, selected, prior, lam)

  objective = lambda m: emc.memory_objective(m, h, slot_index, selected, prior, lam)
  counts = np.bincount(np.asarray(slot_index)[np.asarray(selected)],
                       minlength=num_slots)
  # The Hessian is diagonal per slot: 2 |C_j| (1 + lam) / n_C.
  step = counts.sum() / (2 * counts.max() * (1 + lam))
  descend = jax.jit(lambda m: jax.lax.fori_loop(
      0, 1500, lambda _, m: m - step * jax.grad(objective)(m), m))
  start = jnp.asarray(rng.normal(size=(num_slots, dim)), jnp.float32)
  found = descend(start)
  used = counts > 0
  assert not used.all()  # slot 6 receives no node
  np.testing.assert_allclose(found[used], closed[used], atol=1e-5)
  # Slots without nodes do not enter J; the closed form keeps their prior.
  np.testing.assert_array_equal(closed[~used], prior[~used])
  np.testing.assert_allclose(objective(closed), objective(found), atol=1e-5)


def test_closed_form_matches_the_matrix_formula():
  rng = np.random.default_rng(1)
  h = rng.normal(size=(30, 4))
  slot_index = rng.integers(0, 5, 30)
  selected = rng.random(30) < 0.8
  prior = rng.normal(size=(5, 4))
  lam = 0.1
  p = np.zeros((5, 30))
  p[slot_index[selected], np.flatnonzero(selected)] = 1.0
  sizes = np.diag(p.sum(1))
  expected = np.linalg.solve(p @ p.T + lam * sizes, p @ h + lam * sizes @ prior)
  got = crystallize(jnp.asarray(h, jnp.float32), jnp.asarray(slot_index),
                        jnp.asarray(selected), jnp.asarray(prior, jnp.float32), lam)
  np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_traced_out_of_range_slots_make_the_memory_nan():
  # The shapes of test_closed_form_matches_the_matrix_formula: no compile.
  rng = np.random.default_rng(2)
  h = jnp.asarray(rng.normal(size=(30, 4)), jnp.float32)
  slot_index = rng.integers(0, 5, 30)
  slot_index[3] = 5  # one past the last slot
  selected = np.ones(30, bool)
  prior = jnp.asarray(rng.normal(size=(5, 4)), jnp.float32)
  args = (h, jnp.asarray(slot_index, jnp.int32))
  assert np.isnan(crystallize(*args, jnp.asarray(selected), prior, 0.1)).all()
  selected[3] = False  # an unselected node's slot is never read
  assert np.isfinite(crystallize(*args, jnp.asarray(selected), prior, 0.1)).all()


@pytest.mark.slow  # a fresh compile of update (about 2 s)
def test_traced_nan_features_make_the_memory_nan(setup):
  # Eager calls refuse them (test_contracts.py); under jit a NaN node, never
  # confident, would silently drop out of a plausible memory.
  seq, _, state = setup
  target = seq.domains[1].graph
  features = np.asarray(target.nodes["features"]).copy()
  features[5, 0] = np.nan
  bad = target._replace(nodes={**target.nodes, "features": features})
  updated = jax.jit(emc.update)(state, bad)
  assert np.isnan(updated.memory).all()
  np.testing.assert_array_equal(updated.previous_memory, state.memory)


def test_update_is_invariant_to_node_permutation(setup):
  seq, _, state = setup
  target = seq.domains[1].graph
  perm = np.random.default_rng(0).permutation(80)
  permuted = _permute(target, perm)
  a, b = emc.update(state, target), emc.update(state, permuted)
  np.testing.assert_allclose(a.memory, b.memory, atol=1e-5)
  np.testing.assert_allclose(emc.predict(a, permuted), emc.predict(a, target)[perm],
                             atol=1e-5)


def test_padded_and_unpadded_graphs_give_the_same_memory(setup):
  seq, model, state = setup
  target = seq.domains[1].graph
  padded = _padded(seq)[1]
  a, b = emc.update(state, target), emc.update(state, padded)
  assert not np.allclose(a.memory, state.memory)  # the domain moved the memory
  np.testing.assert_allclose(a.memory, b.memory, atol=1e-5)
  np.testing.assert_allclose(emc.predict(b, padded)[:80], emc.predict(a, target),
                             atol=1e-5)


def test_init_memory_is_a_per_class_kmeans_fixed_point(setup):
  seq, model, state = setup
  source = seq.domains[0]
  h = np.asarray(embed(model, source.graph))[source.train_mask]
  labels = source.labels[source.train_mask]
  slots = np.asarray(state.slot_classes)
  assert slots.size == 4  # max(C=4, ceil(0.05 * 80) = 4)
  assert np.bincount(slots).tolist() == [1, 1, 1, 1]
  for j, c in enumerate(slots):  # one slot per class: the class mean
    np.testing.assert_allclose(state.memory[j], h[labels == c].mean(0), atol=1e-5)


@pytest.mark.parametrize("evolve", emc.EVOLVE)
def test_evolve_prior_follows_its_formula(setup, evolve):
  _, _, state = setup
  rng = np.random.default_rng(2)
  m, prev, prior = (rng.normal(size=state.memory.shape) for _ in range(3))
  state = state._replace(
      memory=jnp.asarray(m, jnp.float32), previous_memory=jnp.asarray(prev, jnp.float32),
      prior=jnp.asarray(prior, jnp.float32), options=emc.EMCOptions(evolve=evolve))
  expected = {
      "ema": 0.5 * prior + 0.5 * m,
      "drift": m + 0.5 * (m - prev),
      "transition": (m @ prev.T @ np.linalg.inv(prev @ prev.T + 1e-2 * np.eye(4))) @ m,
      "none": m,
  }[evolve]
  np.testing.assert_allclose(evolve_prior(state), expected, rtol=1e-4, atol=1e-4)


def test_update_stores_memory_prior_and_previous_memory(setup):
  seq, _, state = setup
  padded = _padded(seq)  # one shape: one compilation
  first = emc.update(state, padded[1])
  second = emc.update(first, padded[2])
  np.testing.assert_allclose(second.prior, evolve_prior(first), atol=1e-6)
  np.testing.assert_array_equal(second.previous_memory, first.memory)
  np.testing.assert_array_equal(first.previous_memory, state.memory)
  # The initial state starts the evolution at the identity: M~ = M_prev = M.
  np.testing.assert_array_equal(first.prior, state.memory)


def test_coral_is_the_identity_on_the_source_and_bn_matches_source_stats(setup):
  seq, model, state = setup
  graph = seq.domains[0].graph
  coral = state._replace(options=emc.EMCOptions(predict="coral"))
  np.testing.assert_allclose(emc.predict(coral, graph), gcn.log_probs(model, graph),
                             atol=2e-3)
  # The model's BatchNorm statistics are the source graph's own moments.
  bn = state._replace(options=emc.EMCOptions(predict="bn"))
  np.testing.assert_allclose(emc.predict(bn, graph), emc.predict(state, graph),
                             atol=1e-4)


@pytest.mark.usefixtures("standard_dtype_promotion")
def test_im_replay_moves_only_the_head(setup):
  seq, _, state = setup
  adapted = emc.update(state._replace(options=emc.EMCOptions(adapt="im_replay")),
                       seq.domains[1].graph)
  plain = emc.update(state, seq.domains[1].graph)
  np.testing.assert_allclose(adapted.memory, plain.memory, atol=1e-6)
  for a, b in zip(jax.tree.leaves(adapted.model.params.convs),
                  jax.tree.leaves(state.model.params.convs)):
    np.testing.assert_array_equal(a, b)
  # One Adam step moves every head entry by about the step size, 1e-2.
  change = np.abs(adapted.model.params.head["w"] - state.model.params.head["w"])
  assert 5e-3 < np.median(change) < 2e-2


def test_predict_mixes_classifier_and_prototypes(setup):
  seq, model, state = setup
  graph = seq.domains[1].graph
  h = np.asarray(embed(model, graph), np.float64)
  m = np.asarray(state.memory, np.float64)
  cos = (h / np.linalg.norm(h, axis=1, keepdims=True)) @ (
      m / np.linalg.norm(m, axis=1, keepdims=True)).T
  scores = np.stack([cos[:, state.slot_classes == c].max(1) for c in range(4)], 1)
  np.testing.assert_allclose(
      jax.jit(emc.prototype_scores, static_argnums=(3, 4))(
          jnp.asarray(h, jnp.float32), state.memory, state.slot_classes, 4, 0.1), scores / 0.1, atol=1e-4)
  log_softmax = lambda z: z - np.log(np.sum(np.exp(z - z.max(1, keepdims=True)), 1,
                                            keepdims=True)) - z.max(1, keepdims=True)
  logits = h @ np.asarray(model.params.head["w"]) + np.asarray(model.params.head["b"])
  expected = log_softmax(0.5 * log_softmax(logits) + 0.5 * log_softmax(scores / 0.1))
  np.testing.assert_allclose(emc.predict(state, graph), expected, atol=1e-4)


def test_confident_nodes_fall_back_to_a_class_top_fraction():
  probs = np.array([[0.95, 0.05], [0.97, 0.03], [0.6, 0.4], [0.45, 0.55],
                    [0.3, 0.7], [0.2, 0.8], [0.35, 0.65], [0.49, 0.51],
                    [0.01, 0.99]])
  mask = np.array([True] * 8 + [False])  # the last, confident node is padding
  select = jax.jit(emc.confident_nodes, static_argnums=(3, 4))
  pseudo, selected = select(jnp.log(jnp.asarray(probs, jnp.float32)),
                            jnp.asarray(mask), jnp.array([1, 2]), 0.9, 0.2)
  assert pseudo.tolist() == [0, 0, 0, 1, 1, 1, 1, 1, 1]
  # Class 0 has 2 >= 1 confident nodes; class 1 has 0 < 2 and keeps its top
  # 20% (ceil(0.2 * 5) = 1 node: the 0.8 one).
  assert np.flatnonzero(selected).tolist() == [0, 1, 5]


@settings(max_examples=40, deadline=None)
@given(counts=st.lists(st.integers(1, 300), min_size=1, max_size=12),
       num_nodes=st.integers(1, 5000))
def test_slot_budget_properties(counts, num_nodes):
  slots = emc.slot_budget(np.array(counts), num_nodes, 0.05)
  total = max(len(counts), int(np.ceil(round(0.05 * num_nodes, 9))))
  assert np.all(slots >= 1) and np.all(slots <= counts)
  if min(counts) >= total:
    assert slots.sum() == total
    share = total * np.array(counts) / sum(counts)
    # Largest remainders: floor or ceil of the proportional share, except
    # that a class whose share is below one slot still gets exactly one.
    floored = share < 1
    assert np.all(slots[floored] == 1)
    if not floored.any():
      assert np.all(np.abs(slots - share) < 1)


def test_named_errors(setup):
  seq, model, state = setup
  source = seq.domains[0]
  empty = graphs.make_graph(np.zeros((0, WIDTH), np.float32), [], [])
  with pytest.raises(ValueError, match="source_graph is empty"):
    emc.init(empty, np.zeros(0, int), model=model, key=jax.random.key(0))
  with pytest.raises(ValueError, match="graph is empty"):
    emc.update(state, empty)
  with pytest.raises(ValueError, match="no labelled source node"):
    emc.init(source.graph, source.labels, model=model, key=jax.random.key(0),
             labelled=np.zeros(80, bool))
  wide = graphs.make_graph(np.zeros((5, WIDTH + 1), np.float32), [0], [1])
  for call in (lambda: emc.update(state, wide), lambda: emc.predict(state, wide),
               lambda: emc.init(wide, np.zeros(5, int), model=model,
                                key=jax.random.key(0))):
    with pytest.raises(ValueError, match=f"has {WIDTH + 1} node features per node,"
                                         f" but the model expects {WIDTH}"):
      call()
  with pytest.raises(ValueError, match="evolve must be one of"):
    emc.init(source.graph, source.labels, model=model, key=jax.random.key(0),
             evolve="linear")
  with pytest.raises(ValueError, match=r"classes \[3\] have no labelled"):
    emc.init(source.graph, np.minimum(source.labels, 2), model=model,
             key=jax.random.key(0))


def test_graph_sharded_over_an_explicit_mesh_gives_the_same_results(setup):
  seq, _, state = setup
  graph = _padded(seq)[1]  # 96 nodes and a multiple of 32 edges: 8 shards
  mesh = jax.make_mesh((8,), ("nodes",))
  shard = lambda x: jax.device_put(x, jax.NamedSharding(mesh, jax.P("nodes")))
  sharded = graph._replace(nodes=jax.tree.map(shard, graph.nodes),
                           senders=shard(graph.senders),
                           receivers=shard(graph.receivers))
  with jax.set_mesh(mesh):
    adapted = emc.update(state, sharded)
    log_probs = emc.predict(adapted, sharded)
  expected = emc.update(state, graph)
  np.testing.assert_allclose(adapted.memory, expected.memory, atol=1e-5)
  np.testing.assert_allclose(log_probs, emc.predict(expected, graph), atol=1e-5)


def test_named_variants_are_valid_options_of_the_adapter():
  assert emc.VARIANTS["emc"] == {}  # the defaults
  for name, options in emc.VARIANTS.items():
    method = emc.adapter(**options)
    assert method.update is emc.update, name
  with pytest.raises(ValueError, match="evolve"):
    emc.adapter(evolve="sideways")
