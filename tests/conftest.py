"""Test-wide JAX settings, applied before any JAX backend starts.

Eight virtual CPU devices let sharding tests build (2, 4) meshes on one CPU;
strict dtype promotion and rank promotion errors catch silent upcasts and
broadcasting bugs that would otherwise pass on small shapes.
"""

import os

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("MPLBACKEND", "Agg")

from hypothesis import settings  # pylint: disable=g-import-not-at-top
import jax  # pylint: disable=g-import-not-at-top
import pytest  # pylint: disable=g-import-not-at-top

jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")

# The same examples on every run, so that CI's verdict on a commit does not
# depend on the draw; explore new ones with --hypothesis-seed=random. No
# deadline: tests assert no timings, and an example that compiles or meets a
# busy core once took 0.7 s against hypothesis's default 200 ms.
settings.register_profile("jaxpapers", derandomize=True, deadline=None)
settings.load_profile("jaxpapers")

NUM_TEST_DEVICES = 8


def pytest_sessionstart(session):
  del session
  if jax.device_count() != NUM_TEST_DEVICES:
    raise RuntimeError(
        f"expected {NUM_TEST_DEVICES} virtual CPU devices, found"
        f" {jax.device_count()}: XLA_FLAGS was read before tests/conftest.py"
        " could set it."
    )


@pytest.fixture
def standard_dtype_promotion():
  """Opt-out of strict promotion for tests that drive optax internals that need it.

  optax 0.2.8 mixes int32 counters into float arithmetic: the Adam family's
  bias correction ``decay ** count`` (optax/tree_utils/_tree_math.py::
  tree_bias_correction), MultiSteps' ``emit * gradient_step``
  (optax/transforms/_accumulation.py) and reduce_on_plateau's counters
  (optax/contrib/_reduce_on_plateau.py). Strict promotion rejects both, so only
  tests that run those pieces use this fixture; our own code stays strict.
  """
  with jax.numpy_dtype_promotion("standard"):
    yield


@pytest.fixture(autouse=True, scope="module")
def _fresh_compilation_caches():
  """Drops jax's compilation caches after each test module.

  Every executable a process keeps holds memory maps of its own: one slow
  sharding module took a worker to about 20,000 of Linux's default 65,530.
  A worker that kept all it compiled for the whole slow suite crashed inside
  the XLA:CPU compiler (a segfault, then an abort) in the same routing case.
  A module's programs are compiled again at most once in a later module.
  """
  yield
  jax.clear_caches()


def _contract_mesh(mode):
  """The sharding contract's (2, 4) ("data", "model") mesh with ``mode`` axes.

  ``mode`` is "Auto" or "Explicit", the name of a ``jax.sharding.AxisType``.
  """
  return jax.make_mesh((2, 4), ("data", "model"),
                       axis_types=(getattr(jax.sharding.AxisType, mode),) * 2)


@pytest.fixture(name="contract_mesh")
def contract_mesh_fixture():
  """``contract_mesh(mode)``: the mesh every sharding test runs in."""
  return _contract_mesh


def _check_sharded_call(case, mode):
  """Runs ``case`` jitted on sharded inputs inside a (2, 4) mesh of ``mode``.

  ``case`` is ``(fn, inputs, specs)`` or ``(fn, inputs, specs, tolerances)``:
  ``specs`` holds one PartitionSpec (or pytree of them, or None for a
  replicated input) per input, and ``tolerances`` overrides chex's
  ``rtol``/``atol``. The result must equal the unsharded call's in tree,
  shape, dtype and value.
  """
  import chex  # pylint: disable=g-import-not-at-top
  fn, inputs, specs, *rest = case
  tolerances = {"rtol": 1e-5, "atol": 1e-6, **(rest[0] if rest else {})}
  expected = jax.jit(fn)(*inputs)
  with jax.set_mesh(_contract_mesh(mode)):
    sharded = [_put(x, spec) for x, spec in zip(inputs, specs)]
    got = jax.jit(fn)(*sharded)
  chex.assert_trees_all_equal_shapes_and_dtypes(got, expected)
  chex.assert_trees_all_close(got, expected, **tolerances)


def _put(tree, spec):
  """Places every leaf of ``tree`` by ``spec``: one spec, a pytree of them, or None."""
  if spec is None:
    return tree
  if isinstance(spec, jax.sharding.PartitionSpec):
    return jax.tree.map(lambda leaf: jax.device_put(leaf, spec), tree)
  return jax.tree.map(lambda s, leaf: _put(leaf, s), spec, tree,
                      is_leaf=lambda s: s is None or isinstance(
                          s, jax.sharding.PartitionSpec))


@pytest.fixture(name="check_sharded_call")
def check_sharded_call_fixture():
  """The sharding contract's runner (see ``_check_sharded_call``)."""
  return _check_sharded_call


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
  """Marks the sharding cases a module lists in ``SLOW_CASES`` as slow.

  Runs before ``-m`` deselects, so those cases leave the default suite and
  run with ``-m slow`` (CI runs both): the cases that compile a training
  loop, a rollout or a ``while_loop`` twice per mode take tens of seconds.
  """
  del config
  for item in items:
    slow = getattr(getattr(item, "module", None), "SLOW_CASES", ())
    callspec = getattr(item, "callspec", None)
    if callspec is not None and callspec.params.get("name") in slow:
      item.add_marker(pytest.mark.slow)
