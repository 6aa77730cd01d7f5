r"""Any small symbolic program, by enumerating its worlds.

A user's program ``phi`` maps ``K`` symbols of ``V`` values each to an
integer label. :func:`enumerate_program` evaluates it once on every one of
the :math:`V^K` worlds; the E-step then works on the table:

.. math::
  \log Z = \log \sum_{w:\, \phi(w) = y} \prod_k p(z_k = w_k), \qquad
  q_k(v) = \frac{1}{Z} \sum_{w:\, \phi(w) = y,\, w_k = v} \prod_j p(z_j = w_j).

Cost and memory are O(V^K K) per example, so this is for small symbol
spaces (a few digits); :class:`jaxpapers.nesy.DigitAddition` is the
scalable special case of addition. A label that no world produces is
infeasible: ``log_z = -inf`` and zero marginals, never a NaN; so is a label
whose worlds all have probability 0 (zero-probability evidence). Every int
is a label (``in_range`` is always True). Each symbol's marginal is
normalised on its own, so rows sum to 1 up to rounding.

Source status: exact inference by enumeration is the textbook baseline that
EM-NeSy's E-step generalises (Seibt, De Raedt and Marra, 2026, abstract);
the table layout is ours.

References:
  Seibt, De Raedt and Marra, `EM-NeSy: Expectation-Maximization for
  neurosymbolic learning <https://arxiv.org/abs/2606.14463>`_, 2026.
"""

import dataclasses
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import tree
from jaxpapers._checks import check_int
from jaxpapers.nesy._addition import _log_sum
from jaxpapers.nesy._addition import _lse
from jaxpapers.nesy._addition import _max_shift

DEFAULT_MAX_WORLDS = 10**6


@dataclasses.dataclass(frozen=True, eq=False)
class EnumeratedProgram:
  """A program given by its table of worlds; build it with :func:`enumerate_program`.

  Per-example methods with the interface of
  :class:`jaxpapers.nesy.DigitAddition`: ``logp`` is ``(K, V)``,
  ``label`` an int scalar. Compared by identity, so it can be a static
  ``jit`` argument.

  Attributes:
    worlds: ``(V^K, K)`` int32, every assignment in ``itertools.product``
      order (world ``w`` has index ``sum_k w_k V^(K-1-k)``).
    world_labels: ``(V^K,)`` int32, ``phi`` of each world.
    num_values: ``V``.
  """

  worlds: np.ndarray
  world_labels: np.ndarray
  num_values: int

  def __post_init__(self):
    _check_sizes(1, self.num_values)
    worlds, labels = np.asarray(self.worlds), np.asarray(self.world_labels)
    if (worlds.ndim != 2 or worlds.shape[0] != self.num_values
        ** worlds.shape[1] or labels.shape != worlds.shape[:1]):
      raise ValueError(
          "worlds must be (V^K, K) and world_labels (V^K,) with V ="
          f" num_values = {self.num_values}; got {worlds.shape} and"
          f" {labels.shape} (build it with enumerate_program).")
    if not (np.issubdtype(worlds.dtype, np.integer)
            and np.issubdtype(labels.dtype, np.integer)):
      raise TypeError(f"worlds and world_labels must be int arrays; got"
                      f" {worlds.dtype} and {labels.dtype}.")
    place = self.num_values ** np.arange(worlds.shape[1] - 1, -1, -1)
    if not np.array_equal(worlds @ place, np.arange(len(worlds))):
      raise ValueError("worlds must list every assignment of values in"
                       f" 0..{self.num_values - 1} in itertools.product"
                       " order (build it with enumerate_program).")

  @property
  def num_symbols(self) -> int:
    return self.worlds.shape[1]

  @property
  def label_shape(self) -> tuple[int, ...]:
    return ()

  def placeholder_label(self) -> jax.Array:
    return jnp.asarray(self.world_labels[0], jnp.int32)

  def in_range(self, label: jax.Array) -> jax.Array:
    """Always True: any int is a label (those no world produces are infeasible)."""
    self._check_label(label)
    return (jnp.ones((), bool) if isinstance(label, jax.core.Tracer)
            else np.True_)

  def feasible(self, label: jax.Array) -> jax.Array:
    self._check_label(label)
    return jnp.any(jnp.asarray(self.world_labels) == label)

  def log_z(self, logp: jax.Array, label: jax.Array) -> jax.Array:
    """log Z; its gradient is 0, not NaN, where log Z = -inf."""
    return _lse(self._log_joint(logp, label), axis=0)

  def marginals(self, logp: jax.Array, label: jax.Array
                ) -> tuple[jax.Array, jax.Array]:
    """Marginals ``(K, V)``, each row normalised by its own sum, and log Z.

    Zero rows where log Z = -inf.
    """
    log_joint = self._log_joint(logp, label)
    shift = _max_shift(log_joint, 0)
    # Relative to the best world (weight 1): no underflow, and ties stay
    # exact at any magnitude, where log Z would absorb log 2 at 1e30.
    posterior_w = jnp.exp(log_joint - shift)
    log_z = jnp.squeeze(_log_sum(log_joint, 0, shift) + shift, 0)
    q = jax.vmap(lambda column: jax.ops.segment_sum(
        posterior_w, column, num_segments=self.num_values),
                 in_axes=1)(jnp.asarray(self.worlds))
    total = jnp.sum(q, -1, keepdims=True)
    empty = total == 0
    return jnp.where(empty, 0.0, q / jnp.where(empty, 1.0, total)), log_z

  def map_assignment(self, logp: jax.Array, label: jax.Array
                     ) -> tuple[jax.Array, jax.Array]:
    log_joint = self._log_joint(logp, label)
    best = jnp.argmax(log_joint)
    return self._world(best), jnp.max(log_joint)

  def sample(self, key: jax.Array, logp: jax.Array, label: jax.Array
             ) -> jax.Array:
    return self._world(
        jax.random.categorical(key, self._log_joint(logp, label)))

  def satisfied(self, z: jax.Array, label: jax.Array) -> jax.Array:
    """True iff ``phi(z) = label``; ``z`` is ``(K,)`` ints in ``[0, V)``.

    Concrete values outside ``[0, V)`` are refused; traced ones are never
    satisfied (they would index another world).
    """
    self._check_label(label)
    if z.shape != (self.num_symbols,) or not jnp.issubdtype(z.dtype,
                                                            jnp.integer):
      raise ValueError(f"z must be ({self.num_symbols},) int values; got"
                       f" {z.shape} {z.dtype}.")
    in_range = (z >= 0) & (z < self.num_values)
    if not isinstance(z, jax.core.Tracer) and not np.all(np.asarray(in_range)):
      raise ValueError(f"z values must lie in [0, {self.num_values}); got"
                       f" {np.asarray(z).tolist()}.")
    place = self.num_values ** np.arange(self.num_symbols - 1, -1, -1)
    index = jnp.sum(jnp.clip(z, 0, self.num_values - 1)
                    * jnp.asarray(place, z.dtype))
    return jnp.all(in_range) & (jnp.asarray(self.world_labels)[index] == label)

  def _world(self, index: jax.Array) -> jax.Array:
    """``worlds[index]`` from its digits in base V: arithmetic, not a gather,
    so a batched (sharded) index needs no output sharding."""
    place = self.num_values ** np.arange(self.num_symbols - 1, -1, -1)
    return ((index // jnp.asarray(place, jnp.int32)) % self.num_values).astype(
        jnp.int32)

  def _check_label(self, label: jax.Array) -> None:
    if label.shape != () or not jnp.issubdtype(label.dtype, jnp.integer):
      raise ValueError(f"label must be an int scalar; got {label.shape}"
                       f" {label.dtype}.")

  def _log_joint(self, logp, label):
    """``log p(w)`` for the worlds with ``phi(w) = label``, -inf for the others."""
    self._check_label(label)
    if logp.shape != (self.num_symbols, self.num_values):
      raise ValueError(f"logp must be ({self.num_symbols}, {self.num_values});"
                       f" got {logp.shape}.")
    if not jnp.issubdtype(logp.dtype, jnp.floating):
      raise TypeError(f"logp must be floating point; got {logp.dtype}.")
    worlds = jnp.asarray(self.worlds)
    # The gather reads whole rows of values: gather them where an Explicit
    # axis shards them.
    logp = tree.gather_explicit(logp)[0]
    log_p_w = jnp.sum(jnp.take_along_axis(logp.T, worlds, axis=0), axis=1)
    # Other worlds are -inf, but NaN where logp holds a NaN: an infeasible
    # label must not hide a NaN.
    fill = jnp.where(jnp.any(jnp.isnan(logp)), jnp.nan, -jnp.inf)
    return jnp.where(jnp.asarray(self.world_labels) == label, log_p_w,
                     fill.astype(log_p_w.dtype))


def enumerate_program(phi: Callable[[Sequence[int]], int], num_symbols: int,
                      num_values: int, *,
                      max_worlds: int = DEFAULT_MAX_WORLDS,
                      vectorized: bool = False) -> EnumeratedProgram:
  """Tabulates ``phi`` over all ``num_values ** num_symbols`` worlds.

  Args:
    phi: the program: a tuple of ``num_symbols`` ints in ``[0, num_values)``
      to an int label; with ``vectorized``, a ``(W, K)`` int array to ``(W,)``
      labels.
    num_symbols: K.
    num_values: V.
    max_worlds: refuse tables larger than this (memory is O(V^K K)).
    vectorized: call ``phi`` once on the whole table.

  Returns:
    An :class:`EnumeratedProgram`.

  Example:
    >>> import jax, jax.numpy as jnp
    >>> xor = enumerate_program(lambda z: z[0] ^ z[1], 2, 2)
    >>> logp = jnp.log(jnp.array([[0.5, 0.5], [0.9, 0.1]]))
    >>> q, log_z = xor.marginals(logp, jnp.int32(1))
    >>> round(float(jnp.exp(log_z)), 3), [round(float(v), 3) for v in q[1]]
    (0.5, [0.9, 0.1])
  """
  _check_sizes(num_symbols, num_values)
  check_int("max_worlds", max_worlds, 1)
  num_worlds = num_values**num_symbols
  if num_worlds > max_worlds:
    raise ValueError(
        f"{num_values}^{num_symbols} = {num_worlds} worlds exceed max_worlds ="
        f" {max_worlds}: enumeration is for small symbol spaces (use a"
        " structured E-step such as DigitAddition).")
  worlds = np.stack(np.unravel_index(np.arange(num_worlds),
                                     (num_values,) * num_symbols),
                    1).astype(np.int32)  # itertools.product order
  labels = (np.asarray(phi(worlds)) if vectorized
            else np.array([phi(tuple(int(v) for v in w)) for w in worlds]))
  if labels.shape != (num_worlds,) or not np.issubdtype(labels.dtype,
                                                          np.integer):
    raise ValueError(f"phi must give one int label per world; got"
                     f" {labels.shape} {labels.dtype}.")
  int32 = np.iinfo(np.int32)
  if labels.min() < int32.min or labels.max() > int32.max:
    # Labels are int32 on the device; a wider one would wrap to another.
    raise ValueError(f"phi's labels must fit int32; got {labels.min()} ..."
                     f" {labels.max()}.")
  return EnumeratedProgram(worlds, labels.astype(np.int32), num_values)


def addition_program(num_digits: int, **kwargs) -> EnumeratedProgram:
  """Digit addition by enumeration, labels the integer sums (the baseline of the carry chain).

  Symbols as :class:`jaxpapers.nesy.DigitAddition`: ``(a_1..a_N,
  b_1..b_N)``, least significant first.
  """
  check_int("num_digits", num_digits, 1)
  place = 10 ** np.arange(num_digits)

  def phi(worlds):
    return (worlds[:, :num_digits] @ place + worlds[:, num_digits:] @ place)

  return enumerate_program(phi, 2 * num_digits, 10, vectorized=True, **kwargs)


def _check_sizes(num_symbols, num_values) -> None:
  if not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool)
             for n in (num_symbols, num_values)) or num_symbols < 1 or (
                 num_values < 2):
    raise ValueError(f"need num_symbols >= 1 and num_values >= 2, both ints;"
                     f" got {num_symbols!r}, {num_values!r}.")
