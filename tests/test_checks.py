"""jaxpapers._checks: the scalar checks every area shares."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import _checks


@pytest.mark.parametrize("value", [3, np.int64(3), np.int8(3), np.array(3),
                                   jnp.int32(3)])
def test_check_int_accepts_python_numpy_and_concrete_jax_ints(value):
  out = _checks.check_int("n", value, 1, 5)
  assert out == 3 and type(out) is int


@pytest.mark.parametrize("value", [True, np.bool_(True), 3.0, np.float32(3),
                                   math.nan, math.inf, "3", None,
                                   jnp.float32(3), np.array([3])])
def test_check_int_refuses_what_is_not_an_int(value):
  with pytest.raises(_checks.ArgumentTypeError, match="n must be an int >= 1"):
    _checks.check_int("n", value, 1)


def test_a_wrong_kind_is_both_a_type_and_a_value_error():
  for error in (TypeError, ValueError):
    with pytest.raises(error):
      _checks.check_int("n", 2.0, 1)
    with pytest.raises(error):
      _checks.check_real("x", "2")


@pytest.mark.parametrize("low,high,value,expected", [
    (1, None, 0, r"n must be an int >= 1; got 0\."),
    (None, 4, 5, r"n must be an int <= 4; got 5\."),
    (0, 4, -1, r"n must be an int in \[0, 4\]; got -1\."),
    (2, None, 1, r"n must be an int >= 2 \(pairs\); got 1\."),
])
def test_check_int_bounds_are_inclusive_and_named(low, high, value, expected):
  why = " (pairs)" if low == 2 else ""
  with pytest.raises(ValueError, match=expected) as info:
    _checks.check_int("n", value, low, high, why=why)
  assert not isinstance(info.value, TypeError)


def test_check_int_bounds_are_inclusive():
  assert _checks.check_int("n", 1, 1) == 1
  assert _checks.check_int("n", 0, 0, 4) == 0
  assert _checks.check_int("n", 4, 0, 4) == 4
  assert _checks.check_int("n", -7) == -7


def test_check_int_refuses_a_traced_value():
  def f(n):
    _checks.check_int("n", n, 1)
  with pytest.raises(TypeError, match="n must be an int >= 1"):
    jax.make_jaxpr(f)(3)


@pytest.mark.parametrize("value", [2, 2.5, np.float32(2.5), np.int32(2),
                                   np.array(2.5), jnp.float32(2.5)])
def test_check_real_accepts_real_scalars(value):
  out = _checks.check_real("x", value, low=0.0, high=3.0)
  assert out == float(value) and type(out) is float


@pytest.mark.parametrize("value", [True, np.bool_(False), "1", None, 1j,
                                   np.complex64(1), [1.0], np.ones(2),
                                   jnp.ones(1)])
def test_check_real_refuses_what_is_not_a_real_scalar(value):
  with pytest.raises(_checks.ArgumentTypeError, match="x must be a real number"):
    _checks.check_real("x", value)


@pytest.mark.parametrize("kwargs,value,expected", [
    ({}, math.nan, r"x must be finite; got nan"),
    ({}, math.inf, r"x must be finite; got inf"),
    ({"low": 0.0}, -1, r"x must be >= 0 and finite; got -1\.0"),
    ({"low": 0.0, "low_open": True}, 0.0, r"x must be > 0 and finite; got 0"),
    ({"high": 1.0, "high_open": True}, 1.0, r"x must be < 1 and finite"),
    ({"low": 0.0, "high": 1.0}, 1.5, r"x must lie in \[0, 1\] and be finite"),
    ({"low": 0.0, "high": 1.0, "low_open": True, "high_open": True}, 0.0,
     r"x must lie in \(0, 1\) and be finite"),
    ({"low": 0.0, "high": 1.0}, math.nan, r"x must lie in \[0, 1\]"),
    ({"low": 0.0, "low_open": True, "finite": False}, math.nan,
     r"x must be > 0 \(inf allowed, NaN not\); got nan"),
    ({"low": 0.0, "low_open": True, "finite": False}, -math.inf,
     r"x must be > 0 \(inf allowed"),
    ({"low": 1.0, "why": " (a budget)"}, 0.5,
     r"x must be >= 1 \(a budget\) and finite; got 0\.5"),
])
def test_check_real_bounds(kwargs, value, expected):
  with pytest.raises(ValueError, match=expected) as info:
    _checks.check_real("x", value, **kwargs)
  assert not isinstance(info.value, TypeError)


def test_check_real_bounds_are_closed_unless_open_and_inf_only_if_allowed():
  assert _checks.check_real("x", 0.0, low=0.0, high=1.0) == 0.0
  assert _checks.check_real("x", 1.0, low=0.0, high=1.0) == 1.0
  assert _checks.check_real("x", math.inf, low=0.0, low_open=True,
                            finite=False) == math.inf


def test_traced_values():
  seen = []

  def f(x):
    assert not _checks.is_concrete(x) and not _checks.is_concrete(1.0, [x])
    seen.append(_checks.check_real("x", x, low=0.0, allow_traced=True) is x)
    _checks.check_real("x", x, low=0.0)
  with pytest.raises(TypeError, match="x must be a concrete number, not a"
                     " traced value"):
    jax.make_jaxpr(f)(1.0)
  assert seen == [True]
  assert _checks.is_concrete(1.0, jnp.ones(2), {"a": np.ones(1)}, None)


def test_check_flag_and_check_real_array():
  _checks.check_flag("b", np.bool_(True))
  with pytest.raises(TypeError, match="b must be a bool; got 'yes'"):
    _checks.check_flag("b", "yes")
  _checks.check_real_array("a", np.array([0.0, 2.0]), low=0.0)
  with pytest.raises(ValueError, match="a must be >= 0 and finite"):
    _checks.check_real_array("a", np.array([0.0, -1.0]), low=0.0)
  with pytest.raises(ValueError, match="a must be finite"):
    _checks.check_real_array("a", np.array([np.nan]))
  with pytest.raises(TypeError, match="a must hold real numbers"):
    _checks.check_real_array("a", np.array([True]))
  jax.make_jaxpr(lambda a: _checks.check_real_array("a", a, low=0.0))(
      -jnp.ones(2))


def test_check_nnx_train_state_names_the_state_or_the_graphdef():
  from flax import nnx  # pylint: disable=g-import-not-at-top
  graphdef, params = nnx.split(nnx.Linear(2, 2, rngs=nnx.Rngs(0)))
  _checks.check_nnx_train_state((params, ()), graphdef)
  with pytest.raises(TypeError, match=r"state must be a \(params, opt_state\)"
                     r" pair; got dict"):
    _checks.check_nnx_train_state({}, graphdef)
  with pytest.raises(TypeError, match="graphdef must be an nnx.GraphDef; got"
                     " State"):
    _checks.check_nnx_train_state((params, ()), params)
