"""jaxpapers.routing: a table of misuse, each a named error."""

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import routing

_CONFIG = routing.HeavyDecoderConfig(width=8, decoder_layers=1, head_width=4)
_COORDS = jnp.asarray(routing.random_instances(0, 4, 5))
_TOURS = jnp.tile(jnp.arange(5, dtype=jnp.int32), (4, 1))
_MODEL = routing.HeavyDecoder(_CONFIG, rngs=nnx.Rngs(0))
_PATHS = routing.partial_paths(jax.random.key(0), _TOURS)


def _train(coords, tours):
  graphdef, params = nnx.split(_MODEL, nnx.Param)
  tx = routing.optimizer(1e-3, steps_per_epoch=1)
  state = routing.TrainState(params, tx.init(params))
  return routing.train_steps(state, coords, tours, jax.random.key(0),
                             jnp.asarray(0), graphdef=graphdef, tx=tx,
                             batch_size=2, num_steps=1)


MISUSE = [
    (lambda: routing.layer_parameter_count(0), ValueError,
     "width must be an int >= 1"),
    (lambda: routing.optimizer(0.0, steps_per_epoch=1), ValueError,
     "learning_rate must be > 0"),
    (lambda: _train(_COORDS, _TOURS[:3]), ValueError,
     "tours_MxN must label every instance: 3 tours for 4 instances"),
    (lambda: routing.greedy_gaps(nnx.split(_MODEL, nnx.Param)[1], _COORDS,
                                 jnp.ones((3,)),
                                 graphdef=nnx.split(_MODEL, nnx.Param)[0]),
     ValueError, r"optimal_lengths_B must have shape \[4\]"),
    (lambda: routing.imitation_loss(_MODEL, _COORDS[:2], _PATHS), ValueError,
     r"paths.destination_B must have shape \[2\]"),
    (lambda: routing.imitation_loss(
        _MODEL, _COORDS, _PATHS._replace(unvisited_BxN=_PATHS.unvisited_BxN[:, :4])),
     ValueError, r"paths.unvisited_BxN must have shape \[4, 5\]"),
]


@pytest.mark.parametrize("index", range(len(MISUSE)))
def test_misuse_is_a_named_error(index):
  call, error, message = MISUSE[index]
  with pytest.raises(error, match=message):
    call()


def test_a_label_outside_the_candidates_has_infinite_loss():
  target = jnp.where(_PATHS.unvisited_BxN[0], -1, jnp.arange(5)).max()
  bad = _PATHS._replace(target_B=_PATHS.target_B.at[0].set(target))
  assert np.isfinite(routing.imitation_loss(_MODEL, _COORDS, _PATHS))
  assert np.isinf(routing.imitation_loss(_MODEL, _COORDS, bad))
