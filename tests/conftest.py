"""Test-wide JAX settings, applied before any JAX backend starts.

Eight virtual CPU devices let sharding tests build (2, 4) meshes on one CPU;
strict dtype promotion and rank promotion errors catch silent upcasts and
broadcasting bugs that would otherwise pass on small shapes.

Most of the suite's time is XLA compiling small programs, so two settings
make compiling cheaper without changing what is compiled:

* LLVM's backend runs at -O0 (``--xla_backend_optimization_level=0``): XLA's
  own HLO passes (simplification, fusion, layout) run as always; only the
  machine code of each fused kernel is optimised less, which cuts compile
  time by about a quarter and costs nothing on test-sized arrays. This applies
  to the test process only: the experiment binaries that tests launch get
  XLA's default code generation (their runs are long enough to need it).
* jax's persistent compilation cache, in ``.jax_test_cache/`` at the
  repository root (gitignored; ``JAX_COMPILATION_CACHE_DIR`` overrides it):
  the xdist workers, the modules after a ``jax.clear_caches()``, the
  binaries a test launches several times and, in ``.ci/run``, the slow suite
  after the default suite on the same stack reuse what was compiled once
  (another jax version keys its own entries). A fresh clone starts empty.
"""

import os
import pathlib

_DEVICES_FLAG = "--xla_force_host_platform_device_count=8"
# With the fast code generation flags alone, a program with collectives
# across mesh groups that is read back from the persistent cache deadlocks in
# its all-reduces (XLA's rendezvous gives up after 40 s and aborts Python:
# tests/curvature/test_contracts.py's Explicit case, run twice); the default
# scheduler does not. XLA's HLO scheduling is otherwise unchanged.
_FAST_CODEGEN_FLAGS = ("--xla_backend_optimization_level=0"
                       " --xla_llvm_disable_expensive_passes=true"
                       " --xla_cpu_enable_concurrency_optimized_scheduler=false")
_SUBPROCESS_XLA_FLAGS = f"{os.environ.get('XLA_FLAGS', '')} {_DEVICES_FLAG}".strip()
os.environ["XLA_FLAGS"] = f"{_SUBPROCESS_XLA_FLAGS} {_FAST_CODEGEN_FLAGS}"
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR",
    str(pathlib.Path(__file__).resolve().parent.parent / ".jax_test_cache"))
# Every program, however quick to compile: tests compile thousands of small
# ones, and jax's defaults (1 s, or a minimum entry size) would skip nearly all.
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")

from hypothesis import settings  # pylint: disable=g-import-not-at-top
import jax  # pylint: disable=g-import-not-at-top
import pytest  # pylint: disable=g-import-not-at-top

jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")
# The backend (started at the first device query) has read the fast code
# generation flags; subprocesses, the experiment binaries, inherit only the
# device count.
jax.devices()
os.environ["XLA_FLAGS"] = _SUBPROCESS_XLA_FLAGS

# The same examples on every run, so that CI's verdict on a commit does not
# depend on the draw; explore new ones with --hypothesis-seed=random. No
# deadline: tests assert no timings, and an example that compiles or meets a
# busy core once took 0.7 s against hypothesis's default 200 ms.
settings.register_profile("jaxpapers", derandomize=True, deadline=None)
settings.load_profile("jaxpapers")

NUM_TEST_DEVICES = 8


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
  """Under ``pytest -n N``, each test module runs whole in one worker.

  xdist's default ("load") spreads a module's tests over the workers, so
  both compile the module's programs and build its fixtures; ``--dist
  loadfile`` keeps them together (an explicit ``--dist`` other than "load"
  is left alone).
  """
  if getattr(config.option, "dist", "no") == "load":
    config.option.dist = "loadfile"


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


# Linux's default vm.max_map_count is 65,530 memory maps per process.
_MAX_MEMORY_MAPS_KEPT = 30_000


def _memory_maps():
  with open("/proc/self/maps") as maps:
    return sum(1 for _ in maps)


@pytest.fixture(autouse=True, scope="module")
def _bounded_compilation_caches():
  """Drops jax's compilation caches after a module once they hold too many maps.

  XLA:CPU maps the machine code and constants of every executable it keeps
  into memory of their own: about six memory maps per compiled program
  (measured: 200 small jitted functions add 1,199 maps). jax keeps every
  executable in its in-memory caches for the life of the process, so an
  xdist worker that runs the whole slow suite passed Linux's default limit
  of 65,530 maps and XLA's compiler then failed to map new code (a segfault,
  then an abort, in a routing case; one slow sharding module alone took a
  worker to about 20,000). Dropping the caches releases the maps; below
  half the limit they are kept, so later modules reuse what earlier ones
  compiled (the persistent compilation cache serves what was dropped).
  """
  yield
  if _memory_maps() > _MAX_MEMORY_MAPS_KEPT:
    jax.clear_caches()


@pytest.fixture(name="contract_mesh")
def contract_mesh_fixture():
  """``contract_mesh(mode)``: the (2, 4) mesh every sharding test runs in."""
  from tests import sharding_checks  # pylint: disable=g-import-not-at-top
  return sharding_checks.contract_mesh
