"""The sharding contract's own checks tell a data move from a changed computation."""

import jax
import jax.numpy as jnp
import pytest

from tests import sharding_checks

_X = jnp.arange(32.0).reshape(8, 4)


def _moved(x):
  """Reshards under an Explicit mesh, nothing else: the same computation."""
  if jax.sharding.get_abstract_mesh().empty:
    return jnp.sin(x) * 2.0
  return jnp.sin(jax.sharding.reshard(x, jax.P(None, "model"))) * 2.0


def _per_shard(x):
  """Sums per shard inside a mesh: another computation (a shard_map, a psum)."""
  if jax.sharding.get_abstract_mesh().empty:
    return jnp.sum(x, axis=0)
  return jax.shard_map(lambda block: jax.lax.psum(jnp.sum(block, axis=0), "data"),
                       in_specs=jax.P("data"), out_specs=jax.P())(x)


def test_a_reshard_is_the_same_dataflow():
  sharding_checks.check_trace((_moved, (_X,), (jax.P("data"),)), "Explicit",
                              numeric=False)


@pytest.mark.parametrize("mode", sharding_checks.MODES)
def test_a_shard_map_path_must_be_numeric(mode):
  case = (_per_shard, (_X,), (jax.P("data"),))
  with pytest.raises(AssertionError, match="NUMERIC_CASES"):
    sharding_checks.check_trace(case, mode, numeric=False)
  sharding_checks.check_trace(case, mode, numeric=True)
  sharding_checks.check_numbers(case, mode)


def test_a_different_operation_is_a_different_dataflow():
  unsharded = jax.jit(jnp.sin).trace(_X).jaxpr.jaxpr
  other = jax.jit(jnp.cos).trace(_X).jaxpr.jaxpr
  assert sharding_checks.dataflow(unsharded) != sharding_checks.dataflow(other)
  assert sharding_checks.dataflow(unsharded) == sharding_checks.dataflow(
      jax.jit(jnp.sin).trace(_X + 1.0).jaxpr.jaxpr)


def test_the_mesh_modes_run_can_be_limited_by_name(monkeypatch):
  monkeypatch.delenv("JAXPAPERS_TEST_MESH_MODES", raising=False)
  assert sharding_checks.modes_to_run() == ("Auto", "Explicit")
  monkeypatch.setenv("JAXPAPERS_TEST_MESH_MODES", "Explicit")
  assert sharding_checks.modes_to_run() == ("Explicit",)
  for value in ("explicit", "", "Auto,Manual"):
    monkeypatch.setenv("JAXPAPERS_TEST_MESH_MODES", value)
    with pytest.raises(ValueError, match="JAXPAPERS_TEST_MESH_MODES"):
      sharding_checks.modes_to_run()
