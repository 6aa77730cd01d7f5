"""jaxpapers.routing: a table of misuse, each a named error, and traced bad values flagged."""

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import routing
from jaxpapers.routing import _tsp as tsp

_CONFIG = routing.HeavyDecoderConfig(width=8, decoder_layers=1, head_width=4)
_COORDS = jnp.asarray(routing.random_instances(0, 4, 5))
_NAN_COORDS = _COORDS.at[1, 2, 0].set(jnp.nan)
_TOURS = jnp.tile(jnp.arange(5, dtype=jnp.int32), (4, 1))
_MODEL = routing.HeavyDecoder(_CONFIG, rngs=nnx.Rngs(0))
_GRAPHDEF, _PARAMS = nnx.split(_MODEL, nnx.Param)
_PATHS = routing.partial_paths(jax.random.key(0), _TOURS)
_KEY = jax.random.key(0)


def _train(coords=_COORDS, tours=_TOURS, first_step=0, **kwargs):
  tx = routing.optimizer(1e-3, steps_per_epoch=1)
  state = routing.TrainState(_PARAMS, tx.init(_PARAMS))
  kwargs = {"batch_size": 2, "num_steps": 1, **kwargs}
  return routing.train_steps(state, coords, tours, _KEY,
                             jnp.asarray(first_step), graphdef=_GRAPHDEF,
                             tx=tx, **kwargs)


def _blocks(first_step=0, num_steps=2, block_steps=1):
  tx = routing.optimizer(1e-3, steps_per_epoch=1)
  state = routing.TrainState(_PARAMS, tx.init(_PARAMS))
  return routing.train_blocks(state, _COORDS, _TOURS, _KEY, first_step,
                              num_steps, graphdef=_GRAPHDEF, tx=tx,
                              batch_size=2, block_steps=block_steps)


def _flops(coords=_COORDS, tours=_TOURS, batch_size=2):
  tx = routing.optimizer(1e-3, steps_per_epoch=1)
  state = routing.TrainState(_PARAMS, tx.init(_PARAMS))
  return routing.train_step_flops(state, coords, tours, graphdef=_GRAPHDEF,
                                  tx=tx, batch_size=batch_size)


def _gaps(coords=_COORDS, lengths=(1.0,) * 4):
  lengths = jnp.asarray(lengths)
  return routing.greedy_gaps(_PARAMS, coords, lengths, graphdef=_GRAPHDEF)


def _loss(**fields):
  return routing.imitation_loss(_MODEL, _COORDS, _PATHS._replace(**fields))


def _not_a_candidate():
  """Per example a city that is not among its candidates (current is never one)."""
  return _PATHS.current_B


_NON_FINITE = "holds a non-finite coordinate"

MISUSE = [
    (lambda: routing.layer_parameter_count(0), ValueError,
     "width must be an int >= 1"),
    (lambda: routing.layer_parameter_count(8, gated="yes"), ValueError,
     "gated must be a bool"),
    (lambda: routing.decoder_parameter_count({"width": 8}), TypeError,
     "config must be a HeavyDecoderConfig"),
    (lambda: routing.parameter_count(_PARAMS), TypeError,
     "model must be an nnx.Module"),
    (lambda: routing.HeavyDecoderConfig(width=True, head_width=1), ValueError,
     "width must be an int >= 1; got True"),
    (lambda: routing.HeavyDecoderConfig(gated=1), ValueError,
     "gated must be a bool"),
    (lambda: routing.HeavyDecoder(dict(width=8), rngs=nnx.Rngs(0)), TypeError,
     "config must be a HeavyDecoderConfig"),
    (lambda: routing.optimizer(0.0, steps_per_epoch=1), ValueError,
     "learning_rate must be > 0 and finite"),
    (lambda: routing.optimizer(np.inf, steps_per_epoch=1), ValueError,
     "learning_rate must be > 0 and finite"),
    (lambda: routing.optimizer(np.nan, steps_per_epoch=1), ValueError,
     "learning_rate must be > 0 and finite"),
    (lambda: routing.optimizer(1e-3, steps_per_epoch=2.5), ValueError,
     "steps_per_epoch must be an int >= 1"),
    (lambda: routing.optimizer(1e-3, steps_per_epoch=1, decay=np.nan),
     ValueError, "decay must be > 0 and finite"),
    (lambda: routing.optimizer(1e-3, steps_per_epoch=1, decay=1.5), ValueError,
     r"decay must be in \(0, 1\]"),
    # NaN cities used to come back with a tour (host solvers and decoders).
    (lambda: routing.tour_length(_NAN_COORDS, _TOURS), ValueError,
     r"coords\[1\] " + _NON_FINITE),
    (lambda: routing.nearest_neighbour(np.asarray(_NAN_COORDS)), ValueError,
     _NON_FINITE),
    (lambda: routing.held_karp(np.full((1, 4, 2), np.inf)), ValueError,
     _NON_FINITE),
    (lambda: routing.two_opt(np.asarray(_NAN_COORDS), np.asarray(_TOURS)),
     ValueError, _NON_FINITE),
    (lambda: routing.lkh_tours(np.asarray(_NAN_COORDS)), ValueError,
     _NON_FINITE),
    (lambda: routing.greedy_tours(_MODEL, _NAN_COORDS), ValueError,
     _NON_FINITE),
    (lambda: routing.sample_tours(_MODEL, _NAN_COORDS, _KEY, num_samples=2),
     ValueError, _NON_FINITE),
    (lambda: tsp.distance_matrices(np.full((1, 3, 2), -np.inf)), ValueError,
     _NON_FINITE),
    (lambda: routing.brute_force(np.array([[0, 0], [1, np.nan],
                                                 [1, 1.]])),
     ValueError, _NON_FINITE),
    (lambda: routing.tour_length(jnp.ones((1, 3, 2), bool),
                                 jnp.arange(3)[None]), ValueError,
     r"coords must hold real \(float or int\) coordinates; got dtype bool"),
    (lambda: routing.nearest_neighbour(np.ones((1, 3, 2), complex)),
     ValueError, "real .float or int. coordinates"),
    (lambda: routing.tour_length(_COORDS, _TOURS[:1]), routing.TourError,
     r"shape \[batch, 5\] .*batch = 4 instances"),
    (lambda: routing.two_opt(np.asarray(_COORDS), np.asarray(_TOURS[:1])),
     routing.TourError, "batch = 4 instances"),
    (lambda: routing.two_opt(np.asarray(_COORDS), np.asarray(_TOURS),
                             max_rounds=1.5), ValueError,
     "max_rounds must be an int >= 0"),
    (lambda: routing.held_karp(np.asarray(_COORDS), chunk_size=0.5),
     ValueError, "chunk_size must be an int >= 1"),
    (lambda: routing.brute_force(np.asarray(_COORDS)), ValueError,
     r"coords_Nx2 must be one instance, \[num_cities, 2\]"),
    (lambda: routing.lkh_tours(np.asarray(_COORDS), scale=np.nan), ValueError,
     "scale must be > 0 and finite"),
    (lambda: routing.lkh_tours(np.asarray(_COORDS), runs=1.5), ValueError,
     "runs must be an int >= 1"),
    # Past LKH-3's int range an assertion used to abort the whole process.
    (lambda: routing.lkh_tours(np.asarray(_COORDS), scale=1e9), ValueError,
     "LKH-3 overflows its int weights"),
    (lambda: routing.random_instances(0, 0, 5), ValueError,
     "num_instances must be an int >= 1"),
    (lambda: routing.random_instances(0, 2.0, 5), ValueError,
     "num_instances must be an int >= 1; got 2.0"),
    (lambda: routing.random_instances(-1, 2, 5), ValueError,
     "seed must be an int >= 0"),
    (lambda: routing.random_instances(0, 2, 5.0), ValueError,
     "num_cities must be an int"),
    (lambda: _train(_COORDS, _TOURS[:3]), ValueError,
     "tours_MxN must label every instance: 3 tours for 4 instances"),
    (lambda: _train(_NAN_COORDS), ValueError, _NON_FINITE),
    (lambda: _train(tours=_TOURS.at[2, 1].set(0)), routing.TourError,
     r"tours\[2\] = \[0, 0, 2, 3, 4\] is not a permutation"),
    (lambda: _train(_COORDS[:0], _TOURS[:0]), ValueError,
     "at least one instance"),
    (lambda: _train(first_step=0.0), ValueError,
     "first_step must be an integer scalar"),
    (lambda: _train(batch_size=2.5), ValueError,
     "batch_size must be an int >= 1"),
    (lambda: _train(num_steps=0), ValueError, "num_steps must be an int >= 1"),
    (lambda: _blocks(first_step=-1), ValueError,
     "first_step must be an int >= 0"),
    (lambda: _blocks(num_steps=0), ValueError, "num_steps must be an int >= 1"),
    (lambda: _blocks(block_steps=1.5), ValueError,
     "block_steps must be an int >= 1"),
    (lambda: _blocks(num_steps=3, block_steps=2), ValueError,
     "num_steps must be a multiple of block_steps; got 3 and 2"),
    (lambda: _flops(batch_size=0), ValueError, "batch_size must be an int >= 1"),
    (lambda: _flops(tours=_TOURS[:3]), ValueError,
     "tours_MxN must label every instance: 3 tours for 4 instances"),
    (lambda: _flops(_NAN_COORDS), ValueError, _NON_FINITE),
    (lambda: _gaps(lengths=jnp.ones((3,))), ValueError,
     r"optimal_lengths_B must be a real array of shape \[4\]"),
    (lambda: _gaps(lengths=jnp.array([1.0, -1.0, 1.0, 1.0])), ValueError,
     "optimal_lengths_B must be finite and >= 0"),
    (lambda: _gaps(lengths=jnp.array([1.0, np.nan, 1.0, 1.0])), ValueError,
     "optimal_lengths_B must be finite and >= 0"),
    (lambda: _gaps(coords=_NAN_COORDS), ValueError, _NON_FINITE),
    (lambda: routing.greedy_tours(_PARAMS, _COORDS), TypeError,
     "model must be a HeavyDecoder"),
    (lambda: routing.sample_tours(_MODEL, _COORDS, _KEY, num_samples=1.5),
     ValueError, "num_samples must be an int >= 1"),
    (lambda: routing.sample_tours(_MODEL, _COORDS, _KEY, num_samples=2,
                                  temperature=np.inf), ValueError,
     "temperature must be > 0 and finite"),
    (lambda: jax.jit(lambda t: routing.sample_tours(
        _MODEL, _COORDS, _KEY, num_samples=2, temperature=t))(1.0), TypeError,
     "temperature must be a concrete number"),
    (lambda: routing.partial_paths(_KEY, _TOURS, min_length=3.5), ValueError,
     "min_length must be an int >= 3"),
    (lambda: routing.imitation_loss(_MODEL, _COORDS[:2], _PATHS), ValueError,
     r"paths.destination_B must have shape \[2\]"),
    (lambda: _loss(unvisited_BxN=_PATHS.unvisited_BxN[:, :4]), ValueError,
     r"paths.unvisited_BxN must have shape \[4, 5\]"),
    (lambda: _loss(unvisited_BxN=_PATHS.unvisited_BxN.astype(jnp.int32)),
     ValueError, "unvisited_BxN must be a bool array"),
    (lambda: _loss(target_B=_PATHS.target_B.astype(jnp.float32)), ValueError,
     r"paths.target_B must be an int array of shape \[4\]"),
    # -1 used to be read as the last city.
    (lambda: _loss(target_B=_PATHS.target_B.at[0].set(-1)), ValueError,
     r"paths.target_B must hold city ids in \[0, 5\); got \[-1\]"),
    (lambda: _loss(current_B=_PATHS.current_B.at[3].set(5)), ValueError,
     r"current_B must hold city ids in \[0, 5\)"),
    (lambda: _loss(target_B=_not_a_candidate()), ValueError,
     r"paths.target_B\[0\] must be one of the example's candidates"),
    (lambda: _loss(unvisited_BxN=jnp.zeros((4, 5), bool)), ValueError,
     "some have no candidates at all"),
    (lambda: routing.imitation_loss(_MODEL, _COORDS, tuple(_PATHS)),
     TypeError, "paths must be PartialPaths"),
    (lambda: routing.imitation_loss(_MODEL, _COORDS[:0], _PATHS), ValueError,
     "at least one example"),
    (lambda: _MODEL(_COORDS, _PATHS.destination_B.at[0].set(-1),
                    _PATHS.current_B, _PATHS.unvisited_BxN), ValueError,
     r"destination_B must hold city ids in \[0, 5\)"),
]


@pytest.mark.parametrize("index", range(len(MISUSE)))
def test_misuse_is_a_named_error(index):
  call, error, message = MISUSE[index]
  with pytest.raises(error, match=message):
    call()


def test_the_host_solvers_take_an_empty_batch():
  empty = np.zeros((0, 5, 2), np.float32)
  tours, lengths = routing.held_karp(empty)  # used to fail in np.concatenate
  assert tours.shape == (0, 5) and lengths.shape == (0,)
  assert routing.nearest_neighbour(empty).shape == (0, 5)
  # two_opt used to fail reshaping an empty batch.
  assert routing.two_opt(empty, np.zeros((0, 5), np.int32)).shape == (0, 5)


@jax.jit
def _traced(params, coords, tours, paths):
  """What sees traced values (but decoding), compiled once for this module."""
  model = nnx.merge(_GRAPHDEF, params)
  return (routing.tour_length(coords, tours),
          routing.imitation_loss(model, coords, paths),
          routing.partial_paths(_KEY, tours).unvisited_BxN)


def test_traced_bad_values_give_nan_never_a_plausible_number():
  lengths, loss, unvisited = _traced(_PARAMS, _COORDS, _TOURS, _PATHS)
  assert np.isfinite(lengths).all() and np.isfinite(loss)
  lengths, loss, _ = _traced(_PARAMS, _NAN_COORDS, _TOURS, _PATHS)
  assert np.isnan(lengths[1]) and np.isnan(loss)
  assert np.isfinite(np.delete(np.asarray(lengths), 1)).all()
  # A repeated city or a -1 (read as the last city) used to give a shorter
  # tour; now NaN, row by row.
  bad = _TOURS.at[1, 1].set(0).at[2, 4].set(-1)
  bad_lengths, _, bad_unvisited = _traced(_PARAMS, _COORDS, bad, _PATHS)
  assert np.isnan(bad_lengths[1:3]).all()
  np.testing.assert_array_equal(np.asarray(bad_lengths)[[0, 3]],
                                np.asarray(lengths)[[0, 3]])
  # Training examples drawn from such tours have no candidates (a NaN loss).
  assert not np.asarray(bad_unvisited[1:3]).any()
  np.testing.assert_array_equal(np.asarray(bad_unvisited)[[0, 3]],
                                np.asarray(unvisited)[[0, 3]])
  # A label that is a city but not a candidate has probability 0 (an
  # infinite loss); one outside [0, N) is NaN.
  not_a_candidate = _PATHS._replace(target_B=_not_a_candidate())
  assert np.isposinf(_traced(_PARAMS, _COORDS, _TOURS, not_a_candidate)[1])
  outside = _PATHS._replace(target_B=_PATHS.target_B.at[0].set(-1))
  assert np.isnan(_traced(_PARAMS, _COORDS, _TOURS, outside)[1])


@pytest.mark.slow
def test_traced_nan_cities_give_a_permutation_of_nan_length():
  @jax.jit
  def decode(params, coords):
    tours = routing.greedy_tours(nnx.merge(_GRAPHDEF, params), coords)
    return tours, routing.tour_length(coords, tours)

  tours, lengths = decode(_PARAMS, _NAN_COORDS)
  np.testing.assert_array_equal(np.sort(tours, axis=1), _TOURS)
  assert np.isnan(lengths[1])
  assert np.isfinite(np.delete(np.asarray(lengths), 1)).all()
