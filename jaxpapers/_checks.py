"""Scalar argument checks shared by every area of jaxpapers (private).

Counts, sizes and hyperparameters are Python-side values: they reach shapes,
loop bounds and configs, so they are checked when the call is made, with an
error that names the argument. Pytree and array checks live in
:mod:`jaxpapers.tree`.
"""

import math
import operator
from typing import Any

from flax import nnx
import jax
import numpy as np


class ArgumentTypeError(TypeError, ValueError):
  """A value of the wrong kind (a float or bool count, a string rate).

  Both a ``TypeError`` and a ``ValueError``: the areas' checks raised one or
  the other for the same misuse, and callers catching either keep working.
  """


def is_concrete(*values: Any) -> bool:
  """No leaf of ``values`` is a tracer, so every leaf can be read in Python."""
  return not any(isinstance(x, jax.core.Tracer)
                 for x in jax.tree.leaves(values))


def check_flag(name: str, value) -> None:
  """Raises ``TypeError`` unless ``value`` is a bool (a string is truthy)."""
  if not isinstance(value, (bool, np.bool_)):
    raise TypeError(f"{name} must be a bool; got {value!r}.")


def check_int(name: str, value: Any, low: int | None = None,
              high: int | None = None, *, why: str = "") -> int:
  """``value`` as an int, or a named error.

  Anything with ``__index__`` counts as an int: Python and numpy integers
  and concrete integer JAX scalars. Bools, floats (a float would reach
  shapes, and NaN passes no comparison) and traced values raise
  :class:`ArgumentTypeError`; an int outside ``[low, high]`` (either bound
  optional) raises ``ValueError``. ``why`` is appended to the requirement.
  """
  if low is not None and high is not None:
    bound = f" in [{low}, {high}]"
  elif low is not None:
    bound = f" >= {low}"
  elif high is not None:
    bound = f" <= {high}"
  else:
    bound = ""
  message = f"{name} must be an int{bound}{why}; got"
  # Bools first: older numpy warns when a bool scalar is used as an index.
  if isinstance(value, (bool, np.bool_)):
    raise ArgumentTypeError(f"{message} {value!r}.")
  try:
    count = operator.index(value)
  except TypeError:
    raise ArgumentTypeError(f"{message} {value!r}.") from None
  if (low is not None and count < low) or (high is not None and count > high):
    raise ValueError(f"{message} {count}.")
  return count


def check_real(name: str, value: Any, *, low: float | None = None,
               high: float | None = None, low_open: bool = False,
               high_open: bool = False, finite: bool = True,
               allow_traced: bool = False, why: str = "") -> Any:
  """``value`` as a float, or a named error.

  A real scalar is a Python or numpy real number or a concrete 0-d real
  JAX array; anything else (a bool, a string, a complex number, an array
  with elements) raises :class:`ArgumentTypeError`, and so does a traced
  value, with a message saying so, unless ``allow_traced`` (then it is
  returned unchecked, and the caller documents what a bad one does).
  ``ValueError`` for NaN (always), an infinity (unless ``finite=False``)
  or a value outside the bounds: ``low`` and ``high`` are each optional and
  closed unless ``low_open`` / ``high_open``. ``why`` is appended to the
  requirement.
  """
  if isinstance(value, jax.core.Tracer):
    if allow_traced:
      return value
    raise ArgumentTypeError(f"{name} must be a concrete number, not a traced"
                            " value (pass it outside jit).")
  dtype = np.asarray(value).dtype if np.ndim(value) == 0 else None
  if (isinstance(value, (bool, np.bool_, str, bytes)) or dtype is None
      or not (np.issubdtype(dtype, np.integer)
              or np.issubdtype(dtype, np.floating))):
    raise ArgumentTypeError(f"{name} must be a real number; got {value!r}.")
  number = float(value)
  inside = not math.isnan(number) and (not finite or math.isfinite(number))
  if low is not None:
    inside = inside and (number > low if low_open else number >= low)
  if high is not None:
    inside = inside and (number < high if high_open else number <= high)
  if inside:
    return number
  if low is not None and high is not None:
    requirement = (f"lie in {'(' if low_open else '['}{low:g}, {high:g}"
                   f"{')' if high_open else ']'}{why}"
                   + (" and be finite" if finite else ""))
  elif low is not None or high is not None:
    if low is not None:
      comparison = f"{'>' if low_open else '>='} {low:g}"
    else:
      comparison = f"{'<' if high_open else '<='} {high:g}"
    requirement = f"be {comparison}{why}" + (" and finite" if finite else "")
  else:
    requirement = f"be finite{why}" if finite else f"be a number{why}"
  if not finite:
    requirement += " (inf allowed, NaN not)"
  raise ValueError(f"{name} must {requirement}; got {number}.")


def check_real_array(name: str, value, *, low: float | None = None) -> None:
  """A concrete real array: finite and ``>= low``; a traced one passes."""
  if not is_concrete(value):
    return
  array = np.asarray(value)
  if array.dtype == bool or not np.issubdtype(array.dtype, np.number) or (
      np.iscomplexobj(array)):
    raise TypeError(f"{name} must hold real numbers; got dtype {array.dtype}.")
  if not np.all(np.isfinite(array)) or (low is not None
                                        and np.any(array < low)):
    bound = "be finite" if low is None else f"be >= {low:g} and finite"
    raise ValueError(f"{name} must {bound}; got {array}.")


def check_nnx_train_state(state: Any, graphdef: Any) -> None:
  """A ``(params, opt_state)`` pair and the ``nnx.GraphDef`` of its model."""
  if not isinstance(state, tuple) or len(state) != 2:
    raise TypeError(f"state must be a (params, opt_state) pair; got"
                    f" {type(state).__name__}.")
  if not isinstance(graphdef, nnx.GraphDef):
    raise TypeError(f"graphdef must be an nnx.GraphDef; got"
                    f" {type(graphdef).__name__}.")
