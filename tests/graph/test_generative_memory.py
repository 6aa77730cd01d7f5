"""The GCAL-style generative-memory baseline."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers.graph import _domains as domains
from jaxpapers.graph import _gcn as gcn
from jaxpapers.graph import _generative_memory as gm
from jaxpapers.graph import _graphs as graphs


@pytest.fixture(scope="module")
def setup():
  seq = domains.csbm_sequence(num_domains=3, num_nodes=60, feature_width=6,
                              p_in=0.1, p_out=0.02, seed=1)
  model = gcn.init_gcn(jax.random.key(0), 6, 4, hidden=8)
  return seq, model


def _leaves_equal(a, b):
  return all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def test_gradient_distance_matches_gcal_and_has_finite_gradients():
  rng = np.random.default_rng(0)
  real = {"w": rng.normal(size=(4, 3)), "b": rng.normal(size=(3,))}
  syn = {"w": rng.normal(size=(4, 3)), "b": rng.normal(size=(3,))}
  syn["w"][1] = 0.0  # a dead unit: a zero row
  cos = np.sum(real["w"] * syn["w"], 1) / (
      np.linalg.norm(real["w"], axis=1) * np.linalg.norm(syn["w"], axis=1) + 1e-6)
  as_jax = lambda t: jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), t)
  distance = jax.jit(jax.value_and_grad(gm._gradient_distance, argnums=1))
  value, grads = distance(as_jax(real), as_jax(syn))
  np.testing.assert_allclose(value, np.sum(1 - cos), rtol=1e-5)
  assert all(np.all(np.isfinite(g)) for g in jax.tree.leaves(grads))


def test_generator_encodes_real_nodes_and_decodes_one_hard_edge_per_row(setup):
  seq, _ = setup
  generator = gm.init_generator(jax.random.key(0), 6)
  graph = seq.domains[1].graph
  padded = graphs.pad_graph(graph, 80, graph.senders.size + 10)
  encode = jax.jit(gm.encode, static_argnums=2)
  a, b = encode(generator, graph, 3), encode(generator, padded, 3)
  np.testing.assert_allclose(a.mean, b.mean, atol=1e-5)
  syn, prob = jax.jit(functools.partial(gm.decode, hard=True))(
      generator, a.mean, jax.random.key(1))
  weights = np.asarray(syn.edges).reshape(3, 3)
  assert np.count_nonzero(weights, axis=1).tolist() == [1, 1, 1]
  np.testing.assert_allclose(weights.sum(1), np.asarray(prob)[weights > 0])
  np.testing.assert_allclose(prob, np.asarray(prob).T)


@pytest.mark.slow  # compile-bound (20-40 s on 2 cores); CI runs -m slow
@pytest.mark.usefixtures("standard_dtype_promotion")
def test_generative_memory_stores_one_memory_per_domain(setup):
  seq, model = setup
  method = gm.generative_memory(epochs=2, capacity=1)
  state = method.init(model, seq.domains[0].graph, None, None, jax.random.key(0))
  assert state.options.memory_size == 4  # max(C = 4, ceil(0.05 * 60) = 3)
  padded = graphs.pad_to_common_size([d.graph for d in seq.domains])
  first = method.update(state, padded[1])
  second = method.update(first, padded[2])  # the same shapes: no recompilation
  assert int(first.num_memories) == 1 and int(second.num_memories) == 1
  stored = jax.jit(gm.encode, static_argnums=2)(second.generator,
                                                 seq.domains[2].graph, 4)
  np.testing.assert_allclose(second.memories.mean[0], stored.mean, atol=1e-5)
  for leaf in jax.tree.leaves((second.model.params, second.generator)):
    assert np.all(np.isfinite(leaf))
  assert not _leaves_equal(second.generator, first.generator)
  assert not _leaves_equal(second.model.params, first.model.params)
