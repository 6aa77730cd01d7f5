"""EMO and top-k routing against a per-document loop (arXiv:2605.06663)."""

import hypothesis
from hypothesis import strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import moe


B, L, E, K = 2, 16, 8, 2  # shared shapes: one compilation serves most tests


@jax.jit
def _emo(logits, segment_ids, pool):
  return moe.emo_route(logits, segment_ids, pool_size=pool, k=K)


def _pool(size):
  return jnp.full((B, L), size, jnp.int32)


def _softmax(z):
  z = z - np.max(z, axis=-1, keepdims=True)
  e = np.exp(z)
  return e / e.sum(-1, keepdims=True)


def _emo_reference(logits, segment_ids, pool_BxD, k):
  """EMO, one document at a time: pool = top-P_d of summed probabilities."""
  logits = np.asarray(logits, np.float64)
  batch, length, num_experts = logits.shape
  gates = np.zeros((batch, length, k))
  experts = np.zeros((batch, length, k), np.int64)
  pools = np.zeros((batch, length, num_experts), bool)
  for b in range(batch):
    ids = np.asarray(segment_ids[b])
    starts = [0] + [t for t in range(1, length) if ids[t] != ids[t - 1]]
    ends = starts[1:] + [length]
    for d, (start, end) in enumerate(zip(starts, ends)):
      scores = _softmax(logits[b, start:end]).sum(0)
      ranked = sorted(range(num_experts), key=lambda e: (-scores[e], e))
      pool = np.zeros(num_experts, bool)
      pool[ranked[:int(pool_BxD[b, d])]] = True
      for t in range(start, end):
        p = _softmax(np.where(pool, logits[b, t], -np.inf))
        top = sorted(range(num_experts), key=lambda e: (-p[e], e))[:k]
        experts[b, t] = top
        gates[b, t] = p[top]
        pools[b, t] = pool
  return gates, experts, pools


def _random_segments(rng, batch, length, max_documents):
  rows = []
  for _ in range(batch):
    cuts = np.sort(rng.choice(np.arange(1, length), max_documents - 1,
                              replace=False))
    ids = np.zeros(length, np.int32)
    for cut in cuts:
      ids[cut:] += rng.integers(1, 3)  # ids need not be consecutive
    rows.append(ids)
  return jnp.asarray(np.stack(rows))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_emo_route_matches_per_document_loop(seed):
  rng = np.random.default_rng(seed)
  logits = jnp.asarray(rng.normal(size=(B, L, E)) * 2, jnp.float32)
  segments = _random_segments(rng, B, L, 4)
  pool = jnp.asarray(rng.integers(K, E + 1, (B, L)), jnp.int32)
  got = _emo(logits, segments, pool)
  gates, experts, pools = _emo_reference(logits, segments, np.asarray(pool), K)
  np.testing.assert_array_equal(got.experts, experts)
  np.testing.assert_allclose(got.gates, gates, rtol=1e-5, atol=1e-7)
  np.testing.assert_array_equal(got.pool_mask, pools)
  np.testing.assert_allclose(got.probs.sum(-1), 1.0, rtol=1e-5)


def test_pool_range_draws_one_size_per_document_from_the_key():
  rng = np.random.default_rng(3)
  logits = jnp.asarray(rng.normal(size=(B, L, E)), jnp.float32)
  segments = _random_segments(rng, B, L, 3)
  key = jax.random.key(7)
  got = jax.jit(lambda z, s: moe.emo_route(z, s, pool_size=(3, E), k=K,
                                           rng=key))(logits, segments)
  pool = moe.draw_pool_sizes(key, (B, L), (3, E))
  _, experts, pools = _emo_reference(logits, segments, np.asarray(pool), K)
  np.testing.assert_array_equal(got.experts, experts)
  np.testing.assert_array_equal(got.pool_mask, pools)
  assert np.all((np.asarray(pool) >= 3) & (np.asarray(pool) <= E))


@hypothesis.settings(max_examples=25, deadline=None)
@hypothesis.given(seed=st.integers(0, 2**16), pool_size=st.integers(K, E),
                  num_documents=st.integers(1, 6))
def test_pools_respect_document_boundaries(seed, pool_size, num_documents):
  rng = np.random.default_rng(seed)
  logits = jnp.asarray(rng.normal(size=(B, L, E)) * 3, jnp.float32)
  segments = _random_segments(rng, B, L, num_documents)
  r = _emo(logits, segments, _pool(pool_size))
  pools = np.asarray(r.pool_mask)
  ids = np.asarray(segments)
  assert np.all(pools.sum(-1) == pool_size)
  for b in range(B):
    for t in range(1, L):
      if ids[b, t] == ids[b, t - 1]:
        assert np.array_equal(pools[b, t], pools[b, t - 1])
  # No chosen expert lies outside its document's pool, and p is zero there.
  assert np.take_along_axis(pools, np.asarray(r.experts), -1).all()
  assert np.all(np.asarray(r.probs)[~pools] == 0)
  # A document's pool depends on its own tokens only.
  first = segments == segments[:, :1]
  other = jnp.where(first[..., None], logits, logits[:, ::-1] * 5)
  r2 = _emo(other, segments, _pool(pool_size))
  np.testing.assert_array_equal(np.asarray(r2.pool_mask)[np.asarray(first)],
                                pools[np.asarray(first)])


def test_ties_go_to_the_lower_expert_index():
  r = _emo(jnp.zeros((B, L, E)), jnp.zeros((B, L), jnp.int32), _pool(3))
  assert r.pool_mask[0, 0].tolist() == [True] * 3 + [False] * (E - 3)
  assert r.experts[0, 0].tolist() == [0, 1]


def test_gates_are_pool_softmax_without_topk_renormalisation():
  logits = jnp.log(jnp.array([[[0.4, 0.3, 0.2, 0.1]]]))
  r = moe.emo_route(logits, jnp.zeros((1, 1), jnp.int32), pool_size=3, k=2)
  # Pool {0, 1, 2}: p = (0.4, 0.3, 0.2) / 0.9; gates are its top 2, sum < 1.
  np.testing.assert_allclose(r.gates[0, 0], [0.4 / 0.9, 0.3 / 0.9], rtol=1e-6)
  assert r.logits[0, 0, 3] == -jnp.inf
  t = moe.topk_route(logits, k=2)
  np.testing.assert_allclose(t.gates[0, 0], [0.4, 0.3], rtol=1e-6)
  assert t.experts[0, 0].tolist() == [0, 1]


def test_full_pool_is_standard_topk():
  logits = jnp.asarray(np.random.default_rng(0).normal(size=(B, L, E)),
                       jnp.float32)
  segments = jnp.array([[0] * 5 + [1] * 3 + [2] * 8] * B)
  a = _emo(logits, segments, _pool(E))
  b = jax.jit(lambda z: moe.topk_route(z, k=K))(logits)
  np.testing.assert_array_equal(a.experts, b.experts)
  np.testing.assert_allclose(a.gates, b.gates, rtol=1e-6)


def test_document_index_numbers_runs_of_equal_ids():
  ids = jnp.array([[3, 3, 7, 7, 7, 9], [0, 0, 0, 0, 0, 0]])
  assert moe.document_index(ids).tolist() == [[0, 0, 1, 1, 1, 2], [0] * 6]


def test_eager_matches_jit_and_gradients_are_finite():
  logits = jnp.asarray(np.random.default_rng(1).normal(size=(B, L, E)),
                       jnp.float32)
  segments = jnp.array([[0] * 4 + [1] * 12, [0] * 16])
  eager = moe.emo_route(logits, segments, pool_size=_pool(3), k=K)
  jitted = _emo(logits, segments, _pool(3))
  np.testing.assert_array_equal(eager.experts, jitted.experts)
  np.testing.assert_allclose(eager.gates, jitted.gates, rtol=1e-6)
  grad = jax.jit(jax.grad(
      lambda z: jnp.sum(_emo(z, segments, _pool(3)).gates)))(logits)
  assert np.all(np.isfinite(grad)) and np.any(grad != 0)


@pytest.mark.parametrize("kwargs,match", [
    ({"pool_size": 9, "k": 2}, "exceeds the number of routed experts 8"),
    ({"pool_size": (2, 9), "k": 2, "rng": jax.random.key(0)},
     "exceeds the number of routed experts"),
    ({"pool_size": 2, "k": 3}, "k=3 exceeds pool_size=2"),
    ({"pool_size": (2, 6), "k": 3, "rng": jax.random.key(0)}, "k=3 exceeds"),
    ({"pool_size": (2, 6), "k": 2}, "rng is required"),
    ({"pool_size": (6, 2), "k": 2}, "low > high"),
    ({"pool_size": jnp.full((1, 4), 9), "k": 2}, r"must lie in \[k, E\]"),
    ({"pool_size": jnp.full((1, 3), 4), "k": 2}, "must have shape"),
    ({"pool_size": 4, "k": 9}, "k must lie in"),
])
def test_bad_pool_sizes_are_named_errors(kwargs, match):
  logits = jnp.zeros((1, 4, 8))
  with pytest.raises(ValueError, match=match):
    moe.emo_route(logits, jnp.zeros((1, 4), jnp.int32), **kwargs)


def test_unsorted_segment_ids_raise_eagerly_and_poison_under_jit():
  logits = jnp.zeros((2, 4, 8))
  bad = jnp.array([[0, 0, 1, 1], [0, 1, 0, 1]])
  with pytest.raises(ValueError, match=r"segment_ids must be non-decreasing.*\[1\]"):
    moe.emo_route(logits, bad, pool_size=4, k=2)
  r = jax.jit(lambda s: moe.emo_route(logits, s, pool_size=4, k=2))(bad)
  # Traced pool sizes out of range poison their rows too.
  pool = jnp.array([[4] * 4, [9] * 4])
  r2 = jax.jit(lambda p: moe.emo_route(logits, bad[:1].repeat(2, 0),
                                       pool_size=p, k=2))(pool)
  assert np.all(np.isfinite(r2.gates[0])) and np.all(np.isnan(r2.gates[1]))
  assert np.all(np.isfinite(r.gates[0])) and np.all(np.isnan(r.gates[1]))
  with pytest.raises(ValueError, match="segment_ids must have shape"):
    moe.emo_route(logits, jnp.zeros((2, 5), jnp.int32), pool_size=4, k=2)
