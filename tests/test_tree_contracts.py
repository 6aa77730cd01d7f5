"""jaxpapers.tree: a table of misuse, each a named error at trace time."""

import jax
import jax.numpy as jnp
import pytest

from jaxpapers import tree as tree_lib

_TREE = {"a": jnp.ones((2, 3)), "b": jnp.ones(3)}

MISUSE = [
    # zip over mismatched leaves used to drop the extra leaf silently.
    (lambda: tree_lib.vdot(_TREE, {"a": _TREE["a"]}),
     ValueError, "b must have the pytree structure of a"),
    # Elementwise products used to broadcast a (1, 3) leaf against (2, 3).
    (lambda: tree_lib.vdot(_TREE, {"a": jnp.ones((1, 3)), "b": _TREE["b"]}),
     ValueError, r"b must have the leaf shapes of a: \(1, 3\) vs \(2, 3\)"),
    (lambda: tree_lib.check_like(_TREE, {"a": _TREE["a"]}, "v"),
     ValueError, "v must have the pytree structure of params"),
    (lambda: tree_lib.check_real_floating({"n": jnp.ones(2, jnp.int32)}, "v"),
     TypeError, r"v must hold real floating-point arrays; leaf \['n'\]"),
    (lambda: tree_lib.leading_size(_TREE, "batch"),
     ValueError, r"the leaves of batch disagree .*\[2, 3\]"),
    (lambda: tree_lib.leading_size({}, "batch"), ValueError, "batch is empty"),
    (lambda: tree_lib.split_axis(jnp.ones((2, 6)), 1, (4, 2)),
     ValueError, r"product is axis 1's size 6; got \(4, 2\)"),
    (lambda: tree_lib.split_axis(jnp.ones((2, 6)), 1, (1, 2, 3)),
     ValueError, "sizes must be two sizes"),
    (lambda: tree_lib.split_axis(jnp.ones((2, 6)), 2, (1, 2)),
     ValueError, "split_axis: axis 2 must be an axis of the rank-2 array"),
    (lambda: tree_lib.merge_axes(jnp.ones((2, 6)), -1),
     ValueError, "merge_axes: axis -1 must be an axis .* followed by another"),
    (lambda: tree_lib.flat_operator(lambda t: t["a"], _TREE)[0](jnp.ones(9)),
     ValueError, "linear_fn's output must have the pytree structure of"
     " template"),
]


@pytest.mark.parametrize("index", range(len(MISUSE)))
def test_misuse_is_a_named_error(index):
  call, error, message = MISUSE[index]
  with pytest.raises(error, match=message):
    call()


def test_the_checks_hold_on_traced_arguments():
  with pytest.raises(ValueError, match="leaf shapes of a"):
    jax.jit(tree_lib.vdot)(_TREE, {"a": jnp.ones((1, 3)), "b": _TREE["b"]})


def test_projection_spec_keeps_the_batch_and_takes_the_kernels_columns(
    contract_mesh):
  x = jnp.ones((4, 8))
  assert tree_lib.projection_spec(x, jnp.ones((8, 16))) is None  # no mesh
  with jax.set_mesh(contract_mesh("Explicit")):
    x = jax.device_put(x, jax.P("data"))
    spec = lambda kernel_spec: tree_lib.projection_spec(
        x, jax.device_put(jnp.ones((8, 16)), kernel_spec))
    assert spec(jax.P(None, "model")) == jax.P("data", "model")
    assert spec(jax.P("model")) == jax.P("data", None)  # summed over devices
    assert spec(jax.P(None, "data")) == jax.P("data", None)  # axis taken
    assert spec(jax.P(None, ("data", "model"))) == jax.P("data", None)
  with jax.set_mesh(contract_mesh("Auto")):
    assert tree_lib.projection_spec(
        jax.device_put(x, jax.P("data")),
        jax.device_put(jnp.ones((8, 16)), jax.P(None, "model"))) is None


def test_spec_axes_names_every_mesh_axis_of_a_spec():
  assert tree_lib.spec_axes(jax.P("data", None, ("x", "y"))) == (
      "data", "x", "y")
  assert tree_lib.spec_axes("model") == ("model",)
  assert tree_lib.spec_axes(None) == ()


def test_gather_mesh_axes_drops_only_the_named_axes(contract_mesh):
  x = jnp.ones((8, 8))
  assert tree_lib.gather_mesh_axes(x, ("data",)) is x  # no mesh
  spec_after = lambda spec: jax.typeof(tree_lib.gather_mesh_axes(
      jax.device_put(x, spec), ("data",))).sharding.spec
  with jax.set_mesh(contract_mesh("Explicit")):
    assert spec_after(jax.P("data", "model")) == jax.P(None, "model")
    assert spec_after(jax.P(("data", "model"), None)) == jax.P("model", None)
    assert spec_after(jax.P(None, "model")) == jax.P(None, "model")
    kept = jax.device_put(x, jax.P("model"))
    assert tree_lib.gather_mesh_axes(kept, ("data",)) is kept
  with jax.set_mesh(contract_mesh("Auto")):
    auto = jax.device_put(x, jax.P("data"))
    assert tree_lib.gather_mesh_axes(auto, ("data",)) is auto
