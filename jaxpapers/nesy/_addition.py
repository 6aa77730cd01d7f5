r"""N-digit addition as a NeSy program, with an exact E-step over the carry chain.

Symbols: ``z = (a_1..a_N, b_1..b_N)``, the digits of two N-digit numbers,
least significant first, each predicted by a network (``K = 2N`` symbols of
``V = 10`` values). The program is ``phi(z) = a + b``; its label ``y`` is
given as ``N + 1`` digits, least significant first (:func:`sum_to_digits`).

The posterior :math:`q(z) \propto p_\theta(z|x)\,1[\phi(z) = y]` factorises
along the carry chain. With :math:`c_0 = 0`, :math:`c_N = y_{N+1}` and the
2 x 2 transfer matrices

.. math::
  T_i[c, c'] = \sum_{a, b} p(a_i{=}a)\, p(b_i{=}b)\,
  1[(a + b + c) \bmod 10 = y_i]\, 1[\lfloor (a + b + c)/10 \rfloor = c'],

the forward messages are :math:`\alpha_i = \alpha_{i-1} T_i` from
:math:`\alpha_0 = e_0`, the backward ones :math:`\beta_{i-1} = T_i \beta_i`
from :math:`\beta_N = e_{y_{N+1}}`, :math:`Z = p_\theta(y|x) =
\alpha_N[y_{N+1}]`, and

.. math::
  q(a_i{=}a) = \frac{p(a_i{=}a)}{Z} \sum_{c, c'} \alpha_{i-1}[c]
  \Big[\sum_b p(b_i{=}b)\, 1[\ldots]\Big] \beta_i[c'],

the same for :math:`b_i`. Everything runs in log space (``logsumexp``) with
``lax.scan`` over the N positions, at cost O(N * 2 * 2 * 100) per example, so
N = 100 costs 100 times N = 1, where enumerating the :math:`100^N` worlds
explodes. Max-product on the same chain gives the MAP assignment (Viterbi),
forward filtering then backward sampling an exact posterior sample (FFBS).

Labels of digits in 0..9 that no digits can produce (a top digit above 1,
or a sum above :math:`2(10^N - 1)`) are *infeasible*: every method gives
them ``log_z = -inf`` and zero marginals, never a NaN (:func:`sum_to_digits`
raises :class:`UnreachableSumError` for them on the host). So does
zero-probability evidence, a feasible label whose every world has a -inf
log-probability. A label digit outside 0..9 is not a label at all: refused
with a ``ValueError`` when concrete; a traced one gives NaN ``log_z``,
marginals and MAP log-probability (the digits ``map_assignment`` and
``sample`` return for it, or for a ``log_z = -inf`` label, mean nothing).

Everything runs in log space on centred numbers: each position's transfer
matrix is taken relative to its best digit pair, each message relative to
its max (the shifts summed into log Z), and each symbol's marginal is
normalised on its own. So float32 marginals sum to 1 up to rounding, never
exceed 1 and keep ties exact whatever |log Z| (-1e3 at N = 100 and logits
of 20, -1e30 at logits of 1e30).

Source status: the E-step / M-step split is EM-NeSy's (Seibt, De Raedt and
Marra, 2026, abstract); **reconstruction** (ours, ``docs/em_nesy.md``): this
carry-chain factorisation, its max-product and FFBS variants and the
feasibility rule. The chain is the usual hidden-Markov forward-backward
(Rabiner, 1989) with the carry as the hidden state.

References:
  Seibt, De Raedt and Marra, `EM-NeSy: Expectation-Maximization for
  neurosymbolic learning <https://arxiv.org/abs/2606.14463>`_, 2026.
  Rabiner, `A tutorial on hidden Markov models
  <https://doi.org/10.1109/5.18626>`_, Proc. IEEE 77(2), 1989.
"""

import dataclasses
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import tree
from jaxpapers._checks import check_int

NUM_VALUES = 10


class UnreachableSumError(ValueError):
  """A sum that no two N-digit numbers add up to."""


# total[c, a, b] = a + b + c: the column sum of digits a, b and carry-in c.
_TOTAL = (np.arange(2)[:, None, None] + np.arange(NUM_VALUES)[None, :, None]
          + np.arange(NUM_VALUES)[None, None, :])
# carry_ok[c, c', a, b] = 1[(a + b + c) // 10 = c'].
_CARRY_OK = _TOTAL[:, None] // 10 == np.arange(2)[None, :, None, None]


def _carry_mask(label_digits_N: jax.Array) -> jax.Array:
  """``mask[i, c, c', a, b] = 1[(a+b+c) % 10 = y_i and (a+b+c) // 10 = c']``.

  Comparisons, not a lookup table read at the labels: under ``vmap`` over a
  batch sharded along an Explicit mesh axis such a gather has no inferable
  output sharding.
  """
  digit_ok = (jnp.asarray(_TOTAL % 10, label_digits_N.dtype)[None, :, None]
              == label_digits_N[:, None, None, None, None])
  return digit_ok & jnp.asarray(_CARRY_OK)[None]


def _max_shift(x: jax.Array, axis) -> jax.Array:
  """The (gradient-free) max of ``x`` along ``axis``, kept; 0 where not finite."""
  shift = jax.lax.stop_gradient(jnp.max(x, axis=axis, keepdims=True))
  return jnp.where(jnp.isfinite(shift), shift, 0.0)


def _log_sum(x: jax.Array, axis, shift: jax.Array) -> jax.Array:
  """``log sum exp(x - shift)`` along ``axis`` (kept), -inf where every term is.

  Its gradient is 0, not NaN, where every term is -inf: impossible carries
  make whole message entries -inf, and with ``jax.nn.logsumexp`` their
  zero cotangent times 0/0 would leak NaN into the gradient of the feasible
  terms beside them. A NaN term gives NaN (never -inf: a NaN must not read
  as "impossible").
  """
  total = jnp.sum(jnp.exp(x - shift), axis=axis, keepdims=True)
  empty = total == 0
  return jnp.where(empty, -jnp.inf, jnp.log(jnp.where(empty, 1.0, total)))


def _lse(x: jax.Array, axis) -> jax.Array:
  """``logsumexp`` along ``axis`` (removed), NaN-free in value and gradient; see :func:`_log_sum`."""
  shift = _max_shift(x, axis)
  return jnp.squeeze(_log_sum(x, axis, shift) + shift, axis)


def _centre(log_x: jax.Array) -> tuple[jax.Array, jax.Array]:
  """``(log_x - c, c)`` with ``c`` the (gradient-free) max of the last axis.

  A message centred so that its largest entry is 0: O(1) numbers whatever
  the magnitude of what came before, ties exact. All -inf stays all -inf
  (``c = 0``); a NaN stays NaN.
  """
  shift = _max_shift(log_x, -1)
  return log_x - shift, jnp.squeeze(shift, -1)


@dataclasses.dataclass(frozen=True)
class DigitAddition:
  """The program ``a + b = y`` over two ``num_digits``-digit numbers.

  Per-example methods (batch them with ``jax.vmap``, as
  :func:`jaxpapers.nesy.estep` does): ``logp`` is ``(2N, 10)``
  log-probabilities of the symbols ``(a_1..a_N, b_1..b_N)`` (least
  significant first), ``label`` the ``(N + 1,)`` int digits of the sum
  (concrete digits outside 0..9 are refused; see the module docstring for
  infeasible labels and traced ones).

  Example:
    >>> import jax, jax.numpy as jnp
    >>> program = DigitAddition(2)
    >>> logp = jax.nn.log_softmax(jnp.zeros((4, 10)))
    >>> label = jnp.asarray(sum_to_digits(198, 2))  # only 99 + 99
    >>> q, log_z = program.marginals(logp, label)
    >>> round(float(log_z / jnp.log(10.0)), 4), q[:, 9].tolist()
    (-4.0, [1.0, 1.0, 1.0, 1.0])
  """

  num_digits: int

  def __post_init__(self):
    check_int("num_digits", self.num_digits, 1)

  @property
  def num_symbols(self) -> int:
    return 2 * self.num_digits

  @property
  def num_values(self) -> int:
    return NUM_VALUES

  @property
  def label_shape(self) -> tuple[int, ...]:
    return (self.num_digits + 1,)

  def placeholder_label(self) -> jax.Array:
    """A feasible label (0 + 0) that stands in for infeasible ones under ``where``."""
    return jnp.zeros(self.label_shape, jnp.int32)

  def in_range(self, label: jax.Array) -> jax.Array:
    """True iff every digit of ``label`` lies in 0..9 (a well-formed label).

    A concrete label out of range is refused (``ValueError``), so a concrete
    one gives True, checked on the host.
    """
    self._check_label(label)
    if not isinstance(label, jax.core.Tracer):
      return np.True_
    return _digits_in_range(label)

  def feasible(self, label: jax.Array) -> jax.Array:
    """True iff some digits produce ``label``: 0 <= y <= 2 (10^N - 1)."""
    self._check_label(label)
    return self._feasible(label)

  def log_z(self, logp: jax.Array, label: jax.Array) -> jax.Array:
    """:math:`\\log p(y|x)` by the forward pass; differentiable in ``logp``."""
    masked, top = self._masked_joint(logp, label)
    log_t, log_m = self._transfer(masked)
    return self._forward(log_t, log_m)[1][top]

  def marginals(self, logp: jax.Array, label: jax.Array
                ) -> tuple[jax.Array, jax.Array]:
    """Exact posterior marginals ``(2N, 10)`` and log Z by forward-backward.

    Each symbol's marginal is normalised on its own (relative to the best
    world, then by its own sum), not by the global log Z: rows sum to 1 up
    to float32 rounding and no q exceeds 1 however large log Z is in
    magnitude (a global normaliser carried its rounding, about that
    magnitude times epsilon, into every q, and at logits of 1e30 lost ties
    entirely). Zero rows
    where log Z = -inf.
    """
    masked, top = self._masked_joint(logp, label)
    log_t, log_m = self._transfer(masked)
    alpha_in, alpha_end = self._forward(log_t, log_m)
    log_z = alpha_end[top]
    beta_out = self._backward(log_t, top)
    # (N, c, c', a, b), every term centred: O(1) where it matters, whatever
    # the magnitude of log Z (masked - m first: at logits of 1e30 the O(1)
    # messages would vanish into masked).
    scores = (alpha_in[:, :, None, None, None]
              + beta_out[:, None, :, None, None] + (masked - log_m))
    # Probabilities relative to each position's best world, summed per
    # symbol value and normalised by their own total: rows sum to 1 up to
    # rounding, no q exceeds 1, and a row with no mass is zero.
    w = jnp.exp(scores - _max_shift(scores, (1, 2, 3, 4)))
    q = jnp.concatenate([jnp.sum(w, (1, 2, 4)), jnp.sum(w, (1, 2, 3))])
    total = jnp.sum(q, -1, keepdims=True)
    empty = total == 0
    q = jnp.where(empty, 0.0, q / jnp.where(empty, 1.0, total))
    return jnp.where(jnp.isneginf(log_z), 0.0, q), log_z

  def map_assignment(self, logp: jax.Array, label: jax.Array
                     ) -> tuple[jax.Array, jax.Array]:
    """The most probable digits given the label (max-product) and their log-probability."""
    masked, top = self._masked_joint(logp, label)
    n = self.num_digits
    flat = masked.reshape(n, 2, 2, NUM_VALUES * NUM_VALUES)
    best_pair = jnp.argmax(flat, -1).astype(jnp.int32)
    log_t_max = jnp.max(flat, -1)

    def forward(delta, log_t_i):
      scores = delta[:, None] + log_t_i  # (c, c')
      return jnp.max(scores, 0), jnp.argmax(scores, 0).astype(jnp.int32)

    delta0 = _start_at_carry_zero(log_t_max[0, 0])
    delta_end, best_carry_in = jax.lax.scan(forward, delta0, log_t_max)

    def backtrack(carry_out, inputs):
      back_i, pair_i = inputs
      carry_in = back_i[carry_out]
      return carry_in, pair_i[carry_in, carry_out]

    _, pairs = jax.lax.scan(backtrack, top, (best_carry_in, best_pair),
                            reverse=True)
    return self._digits_of_pairs(pairs), delta_end[top]

  def sample(self, key: jax.Array, logp: jax.Array, label: jax.Array
             ) -> jax.Array:
    """One exact sample of ``q(z)`` by forward filtering, backward sampling."""
    masked, top = self._masked_joint(logp, label)
    log_t, log_m = self._transfer(masked)
    alpha_in, _ = self._forward(log_t, log_m)
    # Centred, so that the Gumbel noise of categorical is not lost against
    # log-probabilities of magnitude 1e30 (ties stay ties).
    masked = masked - log_m
    n = self.num_digits
    keys = jax.random.split(key, (n, 2))

    def backward(carry_out, inputs):
      keys_i, alpha_i, log_t_i, masked_i = inputs
      carry_in = jax.random.categorical(
          keys_i[0], alpha_i + log_t_i[:, carry_out]).astype(jnp.int32)
      pair = jax.random.categorical(
          keys_i[1], masked_i[carry_in, carry_out].reshape(-1)).astype(jnp.int32)
      return carry_in, pair

    _, pairs = jax.lax.scan(backward, top, (keys, alpha_in, log_t, masked),
                            reverse=True)
    return self._digits_of_pairs(pairs)

  def satisfied(self, z: jax.Array, label: jax.Array) -> jax.Array:
    """True iff the digits ``z`` (``(2N,)`` ints in 0..9) add up to ``label``.

    Concrete digits outside 0..9 are refused; traced ones are never
    satisfied (a "digit" 12 would otherwise carry into the next place).
    """
    self._check_label(label)
    if z.shape != (self.num_symbols,) or not jnp.issubdtype(z.dtype,
                                                            jnp.integer):
      raise ValueError(f"z must be ({self.num_symbols},) int digits of"
                       f" (a_1..a_N, b_1..b_N); got {z.shape} {z.dtype}.")
    _check_concrete_digits(z, "z")
    z = _whole_symbols(z)
    a, b = z[:self.num_digits], z[self.num_digits:]

    def add(carry, digits):
      total = digits[0] + digits[1] + carry
      return total // 10, total % 10

    carry, sum_digits = jax.lax.scan(add, jnp.zeros_like(z[0]),
                                     jnp.stack([a, b], 1))
    return (_digits_in_range(z) & jnp.all(sum_digits == label[:-1])
            & (carry == label[-1]))

  # ------------------------------------------------------------ internals --

  def _check_label(self, label: jax.Array) -> None:
    if label.shape != self.label_shape or not jnp.issubdtype(label.dtype,
                                                             jnp.integer):
      raise ValueError(
          f"label must be {self.label_shape} int digits of the sum (least"
          f" significant first, see sum_to_digits); got {label.shape}"
          f" {label.dtype}.")
    _check_concrete_digits(label, "label")

  @staticmethod
  def _feasible(label):
    top, lower = label[-1], label[:-1]
    # With top digit 1, y = 10^N + lower <= 2 * 10^N - 2 iff lower != 99..9.
    return _digits_in_range(label) & (
        (top == 0) | ((top == 1) & ~jnp.all(lower == 9)))

  def _masked_joint(self, logp, label):
    """``log p(a_i) + log p(b_i)`` where ``(a, b, c) -> (y_i, c')``, else -inf.

    All -inf for an infeasible label, all NaN for a (traced) digit outside
    0..9 or a NaN in ``logp``, so that every method's log-probability says
    so.
    """
    self._check_label(label)
    n = self.num_digits
    if logp.shape != (2 * n, NUM_VALUES):
      raise ValueError(f"logp must be ({2 * n}, {NUM_VALUES}) log-probabilities"
                       f" of (a_1..a_N, b_1..b_N); got {logp.shape}.")
    if not jnp.issubdtype(logp.dtype, jnp.floating):
      raise TypeError(f"logp must be floating point; got {logp.dtype}.")
    logp = _whole_symbols(logp)
    joint = logp[:n, :, None] + logp[n:, None, :]  # (N, a, b)
    # Clipped only to index safely: the where below overrides those labels.
    mask = _carry_mask(jnp.clip(label[:-1], 0, NUM_VALUES - 1))
    # What is masked out is -inf, but NaN where logp holds a NaN or a digit
    # is out of range: an infeasible label must not hide a NaN either.
    fill = jnp.where(_digits_in_range(label) & ~jnp.any(jnp.isnan(logp)),
                     -jnp.inf, jnp.nan)
    masked = jnp.where(mask & self._feasible(label), joint[:, None, None],
                       fill.astype(joint.dtype))
    return masked, jnp.clip(label[-1], 0, 1).astype(jnp.int32)

  @staticmethod
  def _transfer(masked):
    """Centred log transfer matrices ``log T_i - m_i`` (N, 2, 2) and ``m_i``.

    ``m_i`` ((N, 1, 1, 1, 1)) is position i's largest masked entry, common
    to its four carries, so it factors out of every centred message: the
    chain runs on O(1) numbers and log Z adds the ``m_i`` back.
    """
    best = jax.lax.stop_gradient(jnp.max(masked, axis=(3, 4), keepdims=True))
    shift = jnp.where(jnp.isfinite(best), best, 0.0)
    log_m = _max_shift(best, (1, 2))
    # (shift - m) is exact for close magnitudes (Sterbenz), so ties between
    # carries survive logits of 1e30.
    return jnp.squeeze(_log_sum(masked, (3, 4), shift) + (shift - log_m),
                       (3, 4)), log_m

  @staticmethod
  def _forward(log_t, log_m):
    """Centred incoming messages ``alpha_{i-1}`` (N, 2) and ``log alpha_N``.

    Each message is centred on its max and the shifts summed: the messages
    stay O(1), so their rounding does not grow with |log Z|.
    """
    def step(carry, inputs):
      alpha, log_scale = carry
      log_t_i, log_m_i = inputs
      new, c = _centre(_lse(alpha[:, None] + log_t_i, axis=0))
      return (new, log_scale + (c + log_m_i)), alpha

    log_m = jnp.reshape(log_m, log_m.shape[:1])
    alpha0 = _start_at_carry_zero(log_t[0, 0])
    (alpha_end, log_scale), alpha_in = jax.lax.scan(
        step, (alpha0, jnp.zeros_like(log_m[0])), (log_t, log_m))
    return alpha_in, alpha_end + log_scale

  @staticmethod
  def _backward(log_t, top):
    """Centred outgoing messages ``beta_i`` (N, 2), from ``beta_N = e_top``."""
    def step(beta, log_t_i):
      return _centre(_lse(log_t_i + beta[None, :], axis=1))[0], beta

    beta_end = jnp.where(jnp.arange(2, dtype=top.dtype) == top, 0.0, -jnp.inf).astype(log_t.dtype)
    _, beta_out = jax.lax.scan(step, beta_end, log_t, reverse=True)
    return beta_out

  @staticmethod
  def _digits_of_pairs(pairs):
    return jnp.concatenate([pairs // NUM_VALUES, pairs % NUM_VALUES]).astype(
        jnp.int32)


def _digits_in_range(digits: jax.Array) -> jax.Array:
  return jnp.all((digits >= 0) & (digits < NUM_VALUES))


def _check_concrete_digits(digits: jax.Array, name: str) -> None:
  """Refuses concrete digits outside 0..9; traced ones are the caller's flag."""
  if isinstance(digits, jax.core.Tracer):
    return
  values = np.asarray(digits)
  bad = (values < 0) | (values >= NUM_VALUES)
  if bad.any():
    raise ValueError(f"{name} digits must lie in 0..9; got {values[bad][0]}"
                     f" at position {int(np.flatnonzero(bad)[0])}.")


def _whole_symbols(x: jax.Array) -> jax.Array:
  """One example's symbols ``x`` gathered from Explicit mesh axes.

  The chain pairs ``a_i`` with ``b_i``, two halves of the symbol axis; with
  that axis sharded along an Explicit axis (under a user's ``vmap`` over a
  batch whose digits are sharded) the halves' slices have no sharding. The
  2N symbols of one example are few; the batch's own sharding stays.
  """
  return tree.gather_explicit(x)[0]


def _start_at_carry_zero(row: jax.Array) -> jax.Array:
  """``[0, -inf]`` (carry 0 for sure), typed and sharded like a message ``row``.

  ``full_like`` keeps a batched or device-varying row's sharding, so the
  scan's initial carry matches its output under ``vmap`` over an Explicit
  sharded batch and inside ``shard_map``; a constant would not.
  """
  return jnp.full_like(row, -jnp.inf).at[0].set(0.0)


def sum_to_digits(total: int | Sequence[int], num_digits: int) -> np.ndarray:
  """The ``num_digits + 1`` digits of a sum (or of each of a list), least significant first.

  Python ints, so N = 100 sums are exact. Raises :class:`UnreachableSumError`
  for a sum outside ``[0, 2 (10^N - 1)]``, which no two N-digit numbers make,
  and ``TypeError`` for a sum that is not an int (a float such as 3.5 or
  NaN). An empty list gives ``(0, N + 1)`` digits.

  Example:
    >>> sum_to_digits(1234 + 9876, 4).tolist()
    [0, 1, 1, 1, 1]
  """
  check_int("num_digits", num_digits, 1)
  if np.ndim(total) == 0:
    if isinstance(total, bool) or not (
        isinstance(total, (int, np.integer))
        or np.issubdtype(getattr(total, "dtype", np.float64), np.integer)):
      raise TypeError(f"total must be an int sum; got {total!r}.")
    total = int(total)
    if not 0 <= total <= 2 * (10**num_digits - 1):
      raise UnreachableSumError(
          f"sum {total} is not a sum of two {num_digits}-digit numbers"
          f" (0..{2 * (10**num_digits - 1)}).")
    return np.array([(total // 10**i) % 10 for i in range(num_digits + 1)],
                    np.int32)
  if np.ndim(total) != 1:
    raise ValueError(f"total must be an int or a 1-D list of ints; got"
                     f" shape {np.shape(total)}.")
  if len(total) == 0:
    return np.zeros((0, num_digits + 1), np.int32)
  return np.stack([sum_to_digits(t, num_digits) for t in total])


def digits_to_int(digits: Sequence[int]) -> int:
  """The integer of least-significant-first digits (exact for any length).

  Raises ``ValueError`` for a digit outside 0..9 or no digits at all, and
  ``TypeError`` for digits that are not ints (a float 3.7 is not a digit).
  """
  array = np.asarray(digits)
  if array.ndim != 1 or array.size == 0:
    raise ValueError(f"digits must be a non-empty 1-D sequence; got shape"
                     f" {array.shape}.")
  if not np.issubdtype(array.dtype, np.integer):
    raise TypeError(f"digits must be ints in 0..9; got {array.dtype}.")
  bad = array[(array < 0) | (array >= NUM_VALUES)]
  if bad.size:
    raise ValueError(f"digits must lie in 0..9; got {bad[0]}.")
  return sum(int(d) * 10**i for i, d in enumerate(array))


def addition_examples(digit_labels: np.ndarray, num_sums: int, num_digits: int,
                      seed: int) -> tuple[np.ndarray, np.ndarray]:
  """Random N-digit addition problems over a pool of labelled images.

  Each problem draws ``2N`` image indices uniformly (with replacement across
  problems) from the pool; the label is the sum of the two numbers they
  write, least-significant digit first.

  Args:
    digit_labels: ``(n,)`` class (0..9) of each image of the pool.
    num_sums: number of problems.
    num_digits: N.
    seed: numpy seed.

  Returns:
    ``(indices, label_digits)``: ``(num_sums, 2N)`` int32 indices into the
    pool in symbol order ``(a_1..a_N, b_1..b_N)`` and ``(num_sums, N + 1)``
    int32 digits of the sums.
  """
  check_int("num_digits", num_digits, 1)
  if (not isinstance(num_sums, (int, np.integer)) or isinstance(num_sums, bool)
      or num_sums < 1):
    raise ValueError(f"num_sums and num_digits must be >= 1; got {num_sums!r},"
                     f" {num_digits!r}.")
  check_int("seed", seed, 0, why=" (a numpy seed)")
  digit_labels = np.asarray(digit_labels)
  if (digit_labels.ndim != 1 or digit_labels.size == 0
      or not np.issubdtype(digit_labels.dtype, np.integer)
      or np.any((digit_labels < 0) | (digit_labels >= NUM_VALUES))):
    raise ValueError("digit_labels must be a non-empty 1-D int array of"
                     " classes in 0..9; got"
                     f" {digit_labels.dtype}{list(digit_labels.shape)}.")
  rng = np.random.default_rng(seed)
  indices = rng.integers(0, len(digit_labels), (num_sums, 2 * num_digits))
  digits = np.asarray(digit_labels)[indices]
  # Column addition with carries, vectorised over problems (exact for any N).
  labels = np.zeros((num_sums, num_digits + 1), np.int32)
  carry = np.zeros(num_sums, np.int64)
  for i in range(num_digits):
    total = digits[:, i] + digits[:, num_digits + i] + carry
    labels[:, i], carry = total % 10, total // 10
  labels[:, num_digits] = carry
  return indices.astype(np.int32), labels
