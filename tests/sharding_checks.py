"""The sharding contract's two checks: a compile-free trace and a numeric run.

Every case of a ``tests/**/test_sharding*.py`` table is ``(fn, inputs,
specs)`` or ``(fn, inputs, specs, tolerances)``: ``specs`` holds one
PartitionSpec (or pytree of them, or None for a replicated input) per input.

* :func:`check_trace` compiles nothing. It traces ``jit(fn)`` on the
  sharded inputs inside a (2, 4) ("data", "model") mesh (which checks
  ``shard_map`` specs, collectives' axes and, under Explicit axes, every
  operation's sharding rule) and asserts the unsharded call's output tree,
  shapes and dtypes; under Explicit axes no output's type carries a sharding
  of another mesh. It then compares the two traces' dataflow
  (:func:`dataflow`: every operation, its operands and output shapes, with
  data movement between devices read as the identity). Where it differs, the
  library computes something else when sharded (a collective, a
  ``shard_map``, another branch), and the case must be listed in its table's
  ``NUMERIC_CASES`` for that mode.
* :func:`check_numbers` runs the case jitted, sharded and unsharded, and
  compares the values (the full check, for the cases whose code path differs
  and at least one case per table and mode).

Where the dataflow is the same, the sharded program is the unsharded
computation with its data placed differently: the same operations on the same
values, which XLA partitions. Each table also runs at least one case per mode
numerically (through XLA's partitioner and the reshards of that area), and
``tests/test_public_api.py`` holds every table to that.
"""

import collections
import os
from typing import Any

import chex
import jax
import pytest

MODES = ("Auto", "Explicit")


def modes_to_run() -> tuple[str, ...]:
  """The mesh modes whose contract tests are collected: all, unless limited.

  ``JAXPAPERS_TEST_MESH_MODES`` (comma-separated, e.g. ``Explicit``) limits
  them. CI's oldest-stack stage runs the Explicit cases only: their sharding
  rules are what changed between jax releases, while Auto axes go through
  the same partitioner as on the newest stack, which runs both.
  """
  value = os.environ.get("JAXPAPERS_TEST_MESH_MODES")
  if value is None:
    return MODES
  modes = tuple(mode.strip() for mode in value.split(",") if mode.strip())
  if not modes or set(modes) - set(MODES):
    raise ValueError(f"JAXPAPERS_TEST_MESH_MODES must name some of {MODES},"
                     f" comma-separated; got {value!r}.")
  return modes


def contract_mesh(mode: str) -> jax.sharding.Mesh:
  """The contract's (2, 4) ("data", "model") mesh with ``mode`` axes.

  ``mode`` is "Auto" or "Explicit", the name of a ``jax.sharding.AxisType``.
  """
  return jax.make_mesh((2, 4), ("data", "model"),
                       axis_types=(getattr(jax.sharding.AxisType, mode),) * 2)


def put(tree: Any, spec: Any) -> Any:
  """Places every leaf of ``tree`` by ``spec``: one spec, a pytree of them, or None."""
  if spec is None:
    return tree
  if isinstance(spec, jax.sharding.PartitionSpec):
    return jax.tree.map(lambda leaf: jax.device_put(leaf, spec), tree)
  return jax.tree.map(lambda s, leaf: put(leaf, s), spec, tree,
                      is_leaf=lambda s: s is None or isinstance(
                          s, jax.sharding.PartitionSpec))


# Primitives that only move data between devices (the identity on values).
LAYOUT_PRIMITIVES = frozenset({"reshard", "sharding_constraint", "mesh_cast",
                               "device_put"})


def _subjaxprs(value):
  """The jaxprs held by an equation's parameter (a branch tuple, a body, ...)."""
  if hasattr(value, "eqns"):
    yield value
  elif hasattr(value, "jaxpr") and hasattr(value.jaxpr, "eqns"):
    yield value.jaxpr
  elif isinstance(value, (tuple, list)):
    for item in value:
      yield from _subjaxprs(item)


def dataflow(jaxpr) -> tuple:
  """``jaxpr``'s computation with layout-only primitives read as the identity.

  A nested tuple of (primitive, input positions or literal values, output
  shapes and dtypes, inner jaxprs), one per equation, and the output
  positions; shardings and other parameters are left out. Two traces with
  equal dataflow compute the same values by the same operations in the same
  order; only where the data lives may differ.
  """
  position = {}  # a variable -> its defining position (or a literal's value)

  def ref(atom):
    if hasattr(atom, "val"):  # a Literal
      return ("literal", repr(atom.val))
    return position[atom]

  for index, var in enumerate((*jaxpr.constvars, *jaxpr.invars)):
    position[var] = index
  equations = []
  for eqn in jaxpr.eqns:
    if (eqn.primitive.name in LAYOUT_PRIMITIVES
        and len(eqn.invars) == len(eqn.outvars)):
      position.update((out, ref(v)) for out, v in zip(eqn.outvars, eqn.invars))
      continue
    inner = tuple(dataflow(sub) for value in eqn.params.values()
                  for sub in _subjaxprs(value))
    outputs = tuple((tuple(v.aval.shape), str(v.aval.dtype))
                    for v in eqn.outvars)
    equations.append((eqn.primitive.name, tuple(ref(v) for v in eqn.invars),
                      outputs, inner))
    for index, var in enumerate(eqn.outvars):
      position[var] = (len(equations) - 1, index)
  return tuple(equations), tuple(ref(v) for v in jaxpr.outvars)


def primitive_counts(jaxpr) -> collections.Counter:
  """How often each primitive occurs in ``jaxpr`` and every jaxpr inside it."""
  counts = collections.Counter()
  stack = list(_subjaxprs(jaxpr))
  while stack:
    current = stack.pop()
    for eqn in current.eqns:
      counts[eqn.primitive.name] += 1
      for value in eqn.params.values():
        stack.extend(_subjaxprs(value))
  return counts


def _difference(sharded, unsharded) -> dict[str, int]:
  sharded, unsharded = primitive_counts(sharded), primitive_counts(unsharded)
  return {name: sharded[name] - unsharded[name]
          for name in sorted(set(sharded) | set(unsharded))
          if sharded[name] != unsharded[name]}


# id(case) -> (case, its unsharded trace): both modes compare with one trace.
_UNSHARDED_TRACES = {}


def _traces(case, mode):
  """``(unsharded, sharded)`` traces of ``jit(fn)`` (nothing is compiled)."""
  fn, inputs, specs, *_ = case
  if id(case) not in _UNSHARDED_TRACES:
    _UNSHARDED_TRACES[id(case)] = case, jax.jit(fn).trace(*inputs)
  unsharded = _UNSHARDED_TRACES[id(case)][1]
  with jax.set_mesh(contract_mesh(mode)):
    sharded_inputs = [put(x, spec) for x, spec in zip(inputs, specs)]
    sharded = jax.jit(fn).trace(*sharded_inputs)
  return unsharded, sharded


def check_trace(case, mode: str, numeric: bool) -> None:
  """The compile-free check of ``case`` under ``mode`` (see the module docstring).

  ``numeric`` says whether the case's table lists it in ``NUMERIC_CASES``
  for ``mode``; a case whose dataflow differs when sharded must be.
  """
  unsharded, sharded = _traces(case, mode)
  got = sharded.out_info
  chex.assert_trees_all_equal_shapes_and_dtypes(got, unsharded.out_info)
  if mode == "Explicit":
    axis_names = contract_mesh(mode).axis_names
    for leaf in jax.tree.leaves(got):
      # A constant output (one that no input reaches) has no sharding.
      if leaf.sharding is not None:
        assert leaf.sharding.mesh.axis_names == axis_names, leaf.sharding
  if not numeric:
    sharded_jaxpr, unsharded_jaxpr = sharded.jaxpr.jaxpr, unsharded.jaxpr.jaxpr
    assert dataflow(sharded_jaxpr) == dataflow(unsharded_jaxpr), (
        f"the sharded call computes something else under {mode} axes"
        f" (primitive counts change by"
        f" {_difference(sharded_jaxpr, unsharded_jaxpr)}): a collective, a"
        f" shard_map or another code path; list the case in NUMERIC_CASES"
        f" for {mode}")


def _padded(spec, ndim):
  return tuple(spec) + (None,) * (ndim - len(spec))


def check_numbers(case, mode: str) -> None:
  """Runs ``case`` jitted sharded under ``mode`` and unsharded: the same result.

  Tree, shapes, dtypes and values (chex's ``rtol``/``atol``, 1e-5/1e-6 unless
  the case's ``tolerances`` say otherwise); under Explicit axes the result's
  sharding is the one its traced type declares.
  """
  fn, inputs, specs, *rest = case
  tolerances = {"rtol": 1e-5, "atol": 1e-6, **(rest[0] if rest else {})}
  expected = jax.jit(fn)(*inputs)
  with jax.set_mesh(contract_mesh(mode)):
    sharded_inputs = [put(x, spec) for x, spec in zip(inputs, specs)]
    compiled = jax.jit(fn)
    got = compiled(*sharded_inputs)
    if mode == "Explicit":
      declared = compiled.trace(*sharded_inputs).out_info
      for leaf, info in zip(jax.tree.leaves(got), jax.tree.leaves(declared)):
        if info.sharding is not None:  # None: a constant output
          assert (_padded(leaf.sharding.spec, leaf.ndim)
                  == _padded(info.sharding.spec, leaf.ndim)), (leaf.sharding,
                                                               info)
  chex.assert_trees_all_equal_shapes_and_dtypes(got, expected)
  chex.assert_trees_all_close(got, expected, **tolerances)


def contract_tests(cases, numeric_cases, slow_cases=()):
  """A sharding table's two tests, to bind in its module (pytest collects them).

  Args:
    cases: name -> case (see the module docstring).
    numeric_cases: name -> the modes ("Auto", "Explicit") in which the case
      is also run numerically by :func:`check_numbers`.
    slow_cases: numeric cases that run in the slow suite (``pytest -m slow``).

  Returns:
    ``(test_sharded_call_traces_like_the_unsharded_call,
    test_sharded_inputs_give_the_unsharded_numbers)``.
  """

  modes = modes_to_run()

  @pytest.mark.parametrize("mode", modes)
  @pytest.mark.parametrize("name", sorted(cases))
  def test_sharded_call_traces_like_the_unsharded_call(name, mode):
    check_trace(cases[name], mode, mode in numeric_cases.get(name, ()))

  numeric = [pytest.param(name, mode, id=f"{name}-{mode}",
                          marks=[pytest.mark.slow] if name in slow_cases else [])
             for name in sorted(numeric_cases) for mode in numeric_cases[name]
             if mode in modes]

  @pytest.mark.parametrize("name,mode", numeric)
  def test_sharded_inputs_give_the_unsharded_numbers(name, mode):
    check_numbers(cases[name], mode)

  return (test_sharded_call_traces_like_the_unsharded_call,
          test_sharded_inputs_give_the_unsharded_numbers)
