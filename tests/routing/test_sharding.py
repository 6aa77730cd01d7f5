"""jaxpapers.routing under Auto and Explicit meshes gives the unsharded numbers.

Every case runs jitted on instances sharded along the batch ("data") of a
(2, 4) mesh, with the decoder's feed-forward width over "model" (see
tests/sharding_checks.py, which traces every case). The host-side (numpy) solvers
take device arrays too; they are checked on sharded instances eagerly below.
"""

import functools

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import routing
from tests import nnx_sharding
from tests import sharding_checks

_CONFIG = routing.HeavyDecoderConfig(width=8, decoder_layers=1, head_width=4)
_COORDS = jnp.asarray(routing.random_instances(0, 8, 6))
_TOURS = jnp.asarray(np.stack([np.random.default_rng(i).permutation(6)
                               for i in range(8)]), jnp.int32)
_GRAPHDEF, _PARAMS = nnx.split(routing.HeavyDecoder(_CONFIG, rngs=nnx.Rngs(0)),
                               nnx.Param)


def _param_specs(params):
  """The feed-forward width over "model": "up" columns, "down" rows."""
  def spec(path, _):
    names = [str(getattr(p, "key", p)) for p in path]
    if "up" in names:
      return jax.P(None, "model") if "kernel" in names else jax.P("model")
    if "down" in names and "kernel" in names:
      return jax.P("model")
    return None
  return jax.tree_util.tree_map_with_path(spec, params)


_SPECS = _param_specs(_PARAMS)
# FSDP: every parameter's first even axis along the batch's own "data" axis.
_FSDP_SPECS = nnx_sharding.fsdp_specs(_PARAMS)
_model = lambda params: nnx.merge(_GRAPHDEF, params)


def _decode(params, coords, key):
  model = _model(params)
  return (routing.greedy_tours(model, coords),
          routing.sample_tours(model, coords, key, num_samples=2))


def _imitation(params, coords, tours, key):
  paths = routing.partial_paths(key, tours)
  return paths, routing.imitation_loss(_model(params), coords, paths)


def _step(params, coords, paths):
  model = _model(params)
  return model(coords, *paths[:3]), routing.imitation_loss(model, coords, paths)


def _layer(params, x, valid):
  return _model(params).decoder[0](x, valid)


def _train(params, coords, tours, key):
  # optax's Adam mixes its int32 count into float math (see the
  # standard_dtype_promotion fixture of tests/conftest.py).
  with jax.numpy_dtype_promotion("standard"):
    tx = routing.optimizer(1e-3, steps_per_epoch=2)
    state = routing.TrainState(params, tx.init(params))
    return routing.train_steps(state, coords, tours, key, jnp.asarray(0),
                               graphdef=_GRAPHDEF, tx=tx, batch_size=4,
                               num_steps=1)


CASES = {
    "routing.HeavyDecoder+routing.greedy_tours+routing.sample_tours": (
        _decode, (_PARAMS, _COORDS, jax.random.key(1)),
        (_SPECS, jax.P("data"), None)),
    "routing.partial_paths+routing.imitation_loss": (
        _imitation, (_PARAMS, _COORDS, _TOURS, jax.random.key(2)),
        (_SPECS, jax.P("data"), jax.P("data"), None)),
    "routing.ReZeroLayer+routing.HeavyDecoder": (
        _layer, (_PARAMS, jnp.asarray(np.random.default_rng(0).normal(
            size=(8, 6, 8)), jnp.float32), jnp.asarray(
                np.random.default_rng(1).random((8, 6)) < 0.7)),
        (_FSDP_SPECS, jax.P("data", None, "model"), jax.P("data"))),
    "routing.greedy_tours+routing.sample_tours+routing.HeavyDecoder": (
        _decode, (_PARAMS, _COORDS, jax.random.key(1)),
        (_FSDP_SPECS, jax.P("data"), None)),
    "routing.ReZeroLayer": (
        _layer, (_PARAMS, jnp.asarray(np.random.default_rng(0).normal(
            size=(8, 6, 8)), jnp.float32), jnp.asarray(
                np.random.default_rng(1).random((8, 6)) < 0.7)),
        (_SPECS, jax.P("data"), jax.P("data"))),
    "routing.optimizer+routing.train_steps": (
        _train, (_PARAMS, _COORDS, _TOURS, jax.random.key(3)),
        (_SPECS, jax.P("data"), jax.P("data"), None)),
    # The city axis over "data" (the batch over "model"): the construction
    # loop's per-city mask and the partial paths' per-position reads.
    "routing.sample_tours+routing.greedy_tours+routing.HeavyDecoder": (
        _decode, (_PARAMS, _COORDS, jax.random.key(1)),
        (_SPECS, jax.P("model", "data"), None)),
    "routing.imitation_loss+routing.partial_paths": (
        _imitation, (_PARAMS, _COORDS, _TOURS, jax.random.key(2)),
        (_SPECS, jax.P("model", "data"), jax.P("model", "data"), None)),
    # The paths' unvisited masks sharded like the instances too.
    "routing.HeavyDecoder+routing.imitation_loss": (
        _step, (_PARAMS, _COORDS, routing.partial_paths(jax.random.key(2),
                                                       _TOURS)),
        (_SPECS, jax.P("model", "data"), routing.PartialPaths(
            *[jax.P("model")] * 2, jax.P("model", "data"), jax.P("model")))),
    "routing.greedy_gaps": (
        functools.partial(routing.greedy_gaps, graphdef=_GRAPHDEF),
        (_PARAMS, _COORDS, jnp.full((8,), 2.0)),
        (_SPECS, jax.P("data"), jax.P("data"))),
}

_HOST = ("host-side numpy solver on concrete instances (not jittable); checked"
         " on sharded device arrays by"
         " tests/routing/test_sharding.py::test_host_solvers_take_sharded_arrays")
NOT_SHARDED = {
    "routing.distance_matrices": "numpy float64 on the host, for the host"
                                 " solvers (elkai, Held-Karp checks)",
    "routing.train_blocks": "a Python loop of train_steps calls (case"
                            " routing.optimizer+routing.train_steps) and one"
                            " concatenate of their losses",
    "routing.train_step_flops": "lowers one train_steps step to read XLA's"
                                " FLOP count (a Python float); runs nothing",
    "routing.HeavyDecoderConfig": "a frozen dataclass of static model sizes",
    "routing.layer_parameter_count": "Python-int formula of static sizes",
    "routing.decoder_parameter_count": "Python-int formula of a static config",
    "routing.parameter_count": "sums the static shapes of a model's parameters"
                               " (Python ints); reads no array values",
    "routing.random_instances": "draws numpy instances from a Python seed;"
                                " takes no arrays",
    "routing.held_karp": _HOST,
    "routing.brute_force": _HOST,
    "routing.nearest_neighbour": _HOST,
    "routing.two_opt": _HOST,
    "routing.lkh_tours": _HOST,
}


# Also compared in value (which cases, and why: tests/README.md).
NUMERIC_CASES = {
    "routing.ReZeroLayer": ("Auto",),
    "routing.greedy_tours+routing.sample_tours+routing.HeavyDecoder":
        ("Explicit",),
    "routing.sample_tours+routing.greedy_tours+routing.HeavyDecoder":
        ("Explicit",),
}
# Numeric cases of 1.5 s or more: the slow suite, which CI runs.
SLOW_CASES = {
    "routing.greedy_tours+routing.sample_tours+routing.HeavyDecoder",
}


(test_sharded_call_traces_like_the_unsharded_call,
 test_sharded_inputs_give_the_unsharded_numbers) = (
     sharding_checks.contract_tests(CASES, NUMERIC_CASES, SLOW_CASES))


def _solve_all(coords, one_instance):
  tours, lengths = routing.held_karp(coords)
  neighbour = routing.nearest_neighbour(coords)
  return (tours, lengths, neighbour, routing.two_opt(coords, neighbour),
          routing.lkh_tours(coords), routing.brute_force(one_instance))


@pytest.mark.parametrize("mode", ["Auto", "Explicit"])
def test_host_solvers_take_sharded_arrays(mode, contract_mesh):
  coords = np.asarray(_COORDS)
  mesh = contract_mesh(mode)
  with jax.set_mesh(mesh):
    got = _solve_all(jax.device_put(_COORDS, jax.P("data")),
                     jax.device_put(_COORDS[0], jax.P()))
  for a, b in zip(got, _solve_all(coords, coords[0])):
    np.testing.assert_array_equal(a, b)
