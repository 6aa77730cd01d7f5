"""Tours, lengths and the classical solvers: brute force, invariances, named errors."""

import itertools

import hypothesis
from hypothesis import strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import routing
from jaxpapers.routing import _exact as exact
from jaxpapers.routing import _tsp as tsp


@pytest.mark.parametrize("num_cities", [3, 4, 5, 6, 7, 8])
def test_held_karp_matches_brute_force(num_cities):
  coords = routing.random_instances(num_cities, 12, num_cities)
  tours, lengths = routing.held_karp(coords, chunk_size=5)
  expected = [exact.brute_force(c) for c in coords]
  np.testing.assert_allclose(lengths, expected, rtol=1e-12)
  # The tours are permutations from city 0 whose measured length is optimal.
  assert np.all(tours[:, 0] == 0)
  np.testing.assert_allclose(routing.tour_length(coords, tours), expected,
                             rtol=1e-5)


def test_brute_force_tries_every_tour_on_a_known_instance():
  # Corners of a 2 x 1 rectangle plus the midpoints of its long sides.
  coords = np.array([[0, 0], [1, 0], [2, 0], [2, 1], [1, 1], [0, 1]], float)
  assert exact.brute_force(coords) == pytest.approx(6.0)
  assert routing.held_karp(coords[None])[1][0] == pytest.approx(6.0)


def test_held_karp_rejects_what_it_cannot_solve():
  with pytest.raises(ValueError, match="at most 13 cities"):
    routing.held_karp(np.zeros((1, 14, 2)))
  with pytest.raises(ValueError, match=r"coords.shape\[1\].*>= 3"):
    routing.held_karp(np.zeros((1, 2, 2)))
  with pytest.raises(ValueError, match=r"\[batch, num_cities, 2\]"):
    routing.held_karp(np.zeros((5, 2)))


@hypothesis.given(num_cities=st.integers(3, 12), seed=st.integers(0, 1000),
                  shift=st.integers(0, 11), reverse=st.booleans())
@hypothesis.settings(max_examples=15, deadline=None)
def test_tour_length_is_rotation_and_reflection_invariant(num_cities, seed,
                                                          shift, reverse):
  rng = np.random.default_rng(seed)
  coords = rng.random((1, num_cities, 2)).astype(np.float32)
  tour = rng.permutation(num_cities)[None]
  moved = np.roll(tour, shift % num_cities, axis=1)
  if reverse:
    moved = moved[:, ::-1]
  ordered = coords[0, tour[0]]
  reference = np.sum(np.linalg.norm(ordered - np.roll(ordered, -1, 0), axis=1))
  np.testing.assert_allclose(routing.tour_length(coords, moved), [reference],
                             rtol=1e-5)


def test_tour_length_names_bad_tours():
  coords = routing.random_instances(0, 2, 5)
  with pytest.raises(routing.TourError, match=r"tour\[1\].*not a permutation"):
    routing.tour_length(coords, np.array([[0, 1, 2, 3, 4], [0, 1, 1, 3, 4]]))
  with pytest.raises(routing.TourError, match=r"shape \[batch, 5\]"):
    routing.tour_length(coords, np.zeros((2, 4), np.int32))
  with pytest.raises(routing.TourError, match="integer"):
    routing.tour_length(coords, np.zeros((2, 5), np.float32))
  with pytest.raises(ValueError, match=">= 3"):
    routing.tour_length(coords[:, :2], np.array([[0, 1], [1, 0]]))
  assert issubclass(routing.TourError, ValueError)


def test_tour_length_works_under_jit_and_vmap():
  coords = routing.random_instances(1, 3, 6)
  tours = np.tile(np.arange(6, dtype=np.int32), (3, 1))
  direct = routing.tour_length(coords, tours)
  np.testing.assert_allclose(jax.jit(routing.tour_length)(coords, tours),
                             direct, rtol=1e-6)
  per_instance = jax.vmap(lambda c, t: routing.tour_length(c[None], t[None])[0])
  np.testing.assert_allclose(per_instance(coords, tours), direct, rtol=1e-6)


def test_nearest_neighbour_follows_a_python_reference():
  coords = routing.random_instances(2, 20, 9)
  tours = routing.nearest_neighbour(coords)
  d = tsp.distance_matrices(coords)
  for b in range(len(coords)):
    tour, left = [0], set(range(1, 9))
    while left:
      tour.append(min(left, key=lambda c: d[b, tour[-1], c]))
      left.remove(tour[-1])
    assert tours[b].tolist() == tour


def test_two_opt_gives_two_optimal_tours_no_longer_than_the_start():
  coords = routing.random_instances(3, 30, 9)
  start = routing.nearest_neighbour(coords)
  improved = routing.two_opt(coords, start)
  assert np.all(improved[:, 0] == 0)
  before = np.asarray(routing.tour_length(coords, start))
  after = np.asarray(routing.tour_length(coords, improved))
  assert np.all(after <= before + 1e-6) and np.any(after < before - 1e-3)
  optimal = routing.held_karp(coords)[1]
  assert np.all(after >= optimal - 1e-5)
  # 2-optimal: no segment reversal shortens any tour (checked exhaustively).
  for b in range(len(coords)):
    tour = improved[b]
    for i, j in itertools.combinations(range(9), 2):
      moved = np.concatenate([tour[:i], tour[i:j + 1][::-1], tour[j + 1:]])
      assert (float(routing.tour_length(coords[b:b + 1], moved[None])[0])
              >= after[b] - 1e-5)


def test_two_opt_names_bad_input():
  coords = routing.random_instances(0, 1, 5)
  with pytest.raises(routing.TourError, match="tours"):
    routing.two_opt(coords, np.array([[0, 0, 1, 2, 3]]))
  with pytest.raises(ValueError, match="max_rounds"):
    routing.two_opt(coords, np.arange(5)[None], max_rounds=-1)


def test_lkh_tours_are_optimal_on_small_instances():
  coords = routing.random_instances(4, 20, 9)
  tours = routing.lkh_tours(coords)
  assert np.all(tours[:, 0] == 0)
  np.testing.assert_allclose(routing.tour_length(coords, tours),
                             routing.held_karp(coords)[1], rtol=1e-5)
  with pytest.raises(ValueError, match="runs"):
    routing.lkh_tours(coords, runs=0)


def test_random_instances_are_reproducible():
  a, b = (routing.random_instances(7, 3, 4) for _ in range(2))
  np.testing.assert_array_equal(a, b)
  assert a.dtype == np.float32 and a.min() >= 0 and a.max() < 1
  with pytest.raises(ValueError, match="num_cities"):
    routing.random_instances(0, 3, 2)
  assert jnp.asarray(a).shape == (3, 4, 2)
