r"""Training a digit classifier through sums: one step, one epoch, one test, per method.

An MLP maps each of the ``2N`` images of an N-digit addition problem to
digit logits ``(B, 2N, 10)``; only the sum's digits label the problem
(:class:`~jaxpapers.nesy.DigitAddition`, or any program of
:mod:`jaxpapers.nesy._em`). The methods of :data:`METHODS`:

* ``"semantic"``: a gradient step on :math:`-\frac{1}{B}\sum_b \log
  p_\theta(y_b|x_b)` (:func:`~jaxpapers.nesy.log_z`; autodiff through the
  program);
* ``"em_<inference>"`` (``exact``, ``rejection``, ``hard``, ``stochastic``):
  one E-step (:func:`~jaxpapers.nesy.estep`, no gradient), then
  ``m_steps`` gradient steps on :func:`~jaxpapers.nesy.em_loss` against
  that fixed posterior;
* ``"reinforce"``: :func:`~jaxpapers.nesy.reinforce_loss`.

With one M-step, exact EM and the semantic loss take the same gradient
(Fisher's identity), so from one initial state they trace the same curve up
to float32 rounding. Batches are pure functions of the epoch's key: a
resumed run draws the batches it would have drawn.

Source status: the methods follow the EM-NeSy abstract (Seibt, De Raedt and
Marra, 2026); the step, the epoch's batching and its statistics are ours
(``docs/em_nesy.md``).

References:
  Seibt, De Raedt and Marra, `EM-NeSy: Expectation-Maximization for
  neurosymbolic learning <https://arxiv.org/abs/2606.14463>`_, 2026.
"""

from typing import Any, Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxpapers import data
from jaxpapers import models
from jaxpapers import profiling
from jaxpapers import tree
from jaxpapers._checks import check_int
from jaxpapers.nesy._addition import addition_examples
from jaxpapers.nesy._addition import DigitAddition
from jaxpapers.nesy._addition import digits_to_int
from jaxpapers.nesy._em import _check_program
from jaxpapers.nesy._em import DEFAULT_REINFORCE_SAMPLES
from jaxpapers.nesy._em import DEFAULT_REJECTION_SAMPLES
from jaxpapers.nesy._em import em_loss
from jaxpapers.nesy._em import em_step
from jaxpapers.nesy._em import estep
from jaxpapers.nesy._em import log_z
from jaxpapers.nesy._em import reinforce_loss
from jaxpapers.nesy._enumerated import addition_program

METHODS = ("semantic", "em_exact", "em_rejection", "em_hard", "em_stochastic",
           "reinforce")


class TrainState(NamedTuple):
  """The MLP's parameters and its optimizer's state."""
  params: models.MLPParams
  opt_state: optax.OptState


# (state, key, x_BxKxD, labels) -> (state, (loss, log_z_B, weight))
TrainStep = Callable[..., tuple[TrainState, tuple[jax.Array, jax.Array,
                                                  jax.Array]]]


def init_state(key: jax.Array, optimizer: optax.GradientTransformation,
               layer_sizes: Sequence[int] = (64, 128, 10)) -> TrainState:
  """A fresh MLP (:func:`jaxpapers.models.init_mlp`) and ``optimizer.init`` of it.

  Args:
    key: PRNG key of the weights.
    optimizer: an optax transformation.
    layer_sizes: ``(d_in, hidden..., num_values)``.

  Returns:
    A :class:`TrainState`.

  Raises:
    TypeError: ``optimizer`` is not an optax transformation.
    ValueError: bad ``layer_sizes`` (from :func:`~jaxpapers.models.init_mlp`).

  Example:
    >>> import jax, optax
    >>> state = init_state(jax.random.key(0), optax.sgd(0.1), (64, 8, 10))
    >>> state.params[0]["w"].shape
    (64, 8)
  """
  _check_optimizer(optimizer)
  params = models.init_mlp(key, tuple(layer_sizes))
  return TrainState(params, optimizer.init(params))


def make_train_step(method: str, program: Any,
                    optimizer: optax.GradientTransformation, *,
                    m_steps: int = 1,
                    rejection_samples: int = DEFAULT_REJECTION_SAMPLES,
                    reinforce_samples: int = DEFAULT_REINFORCE_SAMPLES
                    ) -> TrainStep:
  """One training step ``(state, key, x_BxKxD, labels) -> (state, stats)`` of ``method``.

  ``x_BxKxD`` holds the ``K = program.num_symbols`` inputs of each example,
  ``labels`` their program labels. ``stats`` is ``(loss, log_z, weight)``:
  the (last M-step's) loss; the ``(B,)`` log Z of the E-step (``"em_*"``) or
  of the program (``"semantic"``), ``(-inf,)`` for ``"reinforce"``; and the
  ``(B,)`` example weights (EM: 0 where the E-step dropped the example;
  ``(mean reward,)`` for ``"reinforce"``).

  Args:
    method: one of :data:`METHODS` (module docstring).
    program: a NeSy program (:mod:`jaxpapers.nesy._em`).
    optimizer: an optax transformation.
    m_steps: gradient steps per E-step (EM methods).
    rejection_samples: prior samples per example of ``"em_rejection"``.
    reinforce_samples: samples per example of ``"reinforce"``.

  Returns:
    The step, a pure function that works under ``jit``.

  Raises:
    ValueError: an unknown ``method``, or a count that is not an int >= 1
      (``reinforce_samples`` >= 2).
    TypeError: ``program`` lacks the program interface, or ``optimizer``
      is not an optax transformation.

  Example:
    >>> import jax, jax.numpy as jnp, optax
    >>> from jaxpapers import nesy
    >>> opt = optax.sgd(0.1)
    >>> step = make_train_step("em_exact", nesy.DigitAddition(1), opt)
    >>> state = init_state(jax.random.key(0), opt, (64, 8, 10))
    >>> x, labels = jnp.zeros((4, 2, 64)), jnp.zeros((4, 2), jnp.int32)
    >>> state, (loss, log_z, weight) = step(state, jax.random.key(1), x, labels)
    >>> log_z.shape, weight.tolist()
    ((4,), [1.0, 1.0, 1.0, 1.0])
  """
  if method not in METHODS:
    raise ValueError(f"method must be one of {METHODS}; got {method!r}.")
  _check_program(program)
  _check_optimizer(optimizer)
  check_int("m_steps", m_steps, 1)
  check_int("rejection_samples", rejection_samples, 1)
  check_int("reinforce_samples", reinforce_samples, 2)

  def update(state, grads):
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    return TrainState(optax.apply_updates(state.params, updates), opt_state)

  if method.startswith("em_"):
    infer = estep(program, method[3:], num_samples=rejection_samples)

    def em(state, key, x, labels):
      loss, post = em_step(infer, key, models.apply_mlp(state.params, x),
                           labels)
      for _ in range(m_steps):  # the posterior stays fixed
        loss, grads = jax.value_and_grad(
            lambda p: em_loss(models.apply_mlp(p, x), post))(state.params)
        state = update(state, grads)
      return state, (loss, post.log_z, post.weight)
    return em

  def loss_fn(params, key, x, labels):
    logits = models.apply_mlp(params, x)
    if method == "semantic":
      value = log_z(program, logits, labels)
      return -jnp.mean(value), (value, jnp.ones_like(value))
    value, reward = reinforce_loss(program, key, logits, labels,
                                   num_samples=reinforce_samples)
    # No log Z here: the weight is the mean reward.
    return value, (jnp.full((1,), -jnp.inf), reward[None])

  def gradient(state, key, x, labels):
    (loss, (value, weight)), grads = jax.value_and_grad(
        loss_fn, has_aux=True)(state.params, key, x, labels)
    return update(state, grads), (loss, value, weight)
  return gradient


def train_epoch(step: TrainStep, state: TrainState, key: jax.Array,
                images: jax.Array, problems: jax.Array, labels: jax.Array, *,
                batch_size: int) -> tuple[TrainState, dict[str, jax.Array]]:
  """One pass over the training sums in ``S // batch_size`` shuffled batches.

  The sums are permuted by ``key``; the remainder of ``S`` that fills no
  batch is skipped this epoch. Batch ``i``'s step key is split from
  ``fold_in(key, 1)``.

  Args:
    step: a step of :func:`make_train_step`.
    state: the :class:`TrainState`.
    key: the epoch's PRNG key (e.g. ``fold_in(seed key, epoch)``).
    images: ``(n, D)`` the pool of inputs.
    problems: ``(S, K)`` int indices into ``images`` per training example
      (:func:`~jaxpapers.nesy.addition_examples`).
    labels: ``(S, ...)`` the examples' program labels.
    batch_size: examples per step, in ``[1, S]``.

  Returns:
    ``(state, stats)``: ``train_loss`` (mean over steps), ``train_log_z``
    (mean log Z over the examples where it is finite, 0 if none) and
    ``train_weight`` (mean example weight).

  Raises:
    ValueError: ``problems`` is not ``(S, K)``, ``labels`` has another
      leading size, or ``batch_size`` lies outside ``[1, S]``.
    TypeError: ``problems`` is not an int array.

  Example:
    >>> import jax, jax.numpy as jnp, optax
    >>> from jaxpapers import nesy
    >>> opt = optax.sgd(0.1)
    >>> step = make_train_step("semantic", nesy.DigitAddition(1), opt)
    >>> state = init_state(jax.random.key(0), opt, (64, 8, 10))
    >>> problems = jnp.zeros((8, 2), jnp.int32)
    >>> state, stats = train_epoch(step, state, jax.random.key(1),
    ...     jnp.ones((3, 64)), problems, jnp.zeros((8, 2), jnp.int32),
    ...     batch_size=4)
    >>> sorted(stats)
    ['train_log_z', 'train_loss', 'train_weight']
  """
  if jnp.ndim(problems) != 2 or jnp.shape(labels)[:1] != jnp.shape(problems)[:1]:
    raise ValueError(
        "problems must be (S, K) and labels (S, ...); got"
        f" {jnp.shape(problems)} and {jnp.shape(labels)}.")
  if not jnp.issubdtype(jnp.result_type(problems), jnp.integer):
    raise TypeError(f"problems must be int indices; got {problems.dtype}.")
  num_sums = problems.shape[0]
  check_int("batch_size", batch_size, 1, num_sums, why=" (at most S)")
  steps = num_sums // batch_size
  order = jax.random.permutation(key, num_sums)
  batches = order[:steps * batch_size].reshape(steps, -1)
  keys = jax.random.split(jax.random.fold_in(key, 1), steps)

  def body(state, inputs):
    step_key, index = inputs
    # The batch's sums (kept sharded as ``index`` is) and their images.
    batch_problems, batch_labels = data.take((problems, labels), index)
    state, (loss, value, weight) = step(
        state, step_key, jnp.take(images, batch_problems, 0), batch_labels)
    finite = jnp.isfinite(value)
    return state, (loss, jnp.sum(jnp.where(finite, value, 0.0)),
                   jnp.sum(finite), jnp.mean(weight))

  state, (loss, value, count, weight) = jax.lax.scan(body, state,
                                                     (keys, batches))
  # Mean log Z over the examples where the E-step gave a finite value.
  mean_log_z = jnp.sum(value) / jnp.maximum(jnp.sum(count), 1).astype(
      value.dtype)
  return state, {"train_loss": jnp.mean(loss), "train_log_z": mean_log_z,
                 "train_weight": jnp.mean(weight)}


def addition_accuracy(program: Any, params: models.MLPParams,
                      images: jax.Array, problems: jax.Array,
                      labels: jax.Array, digits: jax.Array
                      ) -> dict[str, jax.Array]:
  """Test accuracies of the MLP's argmax symbols.

  Args:
    program: the program (its ``satisfied``).
    params: MLP parameters.
    images: ``(n, D)`` the test pool.
    problems: ``(S, K)`` int indices into ``images`` per test example.
    labels: ``(S, ...)`` their program labels.
    digits: ``(n,)`` the class of every image of the pool.

  Returns:
    ``sum_accuracy`` (share of examples whose argmax symbols satisfy the
    label) and ``digit_accuracy`` (share of the pool classified right).

  Raises:
    ValueError: ``problems``, ``labels`` or ``digits`` do not fit ``images``.

  Example:
    >>> import jax, jax.numpy as jnp, optax
    >>> from jaxpapers import nesy
    >>> state = init_state(jax.random.key(0), optax.sgd(0.1), (64, 8, 10))
    >>> acc = addition_accuracy(nesy.DigitAddition(1), state.params,
    ...     jnp.zeros((3, 64)), jnp.zeros((2, 2), jnp.int32),
    ...     jnp.zeros((2, 2), jnp.int32), jnp.zeros(3, jnp.int32))
    >>> sorted(acc)
    ['digit_accuracy', 'sum_accuracy']
  """
  _check_program(program)
  n = jnp.shape(images)[0]
  if (jnp.ndim(problems) != 2 or jnp.shape(labels)[:1] != jnp.shape(problems)[:1]
      or jnp.shape(digits) != (n,)):
    raise ValueError(
        f"problems must be (S, K), labels (S, ...) and digits ({n},) for"
        f" {n} images; got {jnp.shape(problems)}, {jnp.shape(labels)} and"
        f" {jnp.shape(digits)}.")
  # Each sum's images, gathered per device when the sums are sharded.
  x = tree.vmap_sharded(lambda index: images[index])(problems)
  predicted = jnp.argmax(models.apply_mlp(params, x), -1)
  sum_ok = jax.vmap(program.satisfied)(predicted.astype(jnp.int32), labels)
  digit_ok = jnp.argmax(models.apply_mlp(params, images), -1) == digits
  return {"sum_accuracy": jnp.mean(sum_ok.astype(jnp.float32)),
          "digit_accuracy": jnp.mean(digit_ok.astype(jnp.float32))}


def addition_batch(images: np.ndarray, digit_labels: np.ndarray,
                   num_sums: int, num_digits: int, *, seed: int
                   ) -> tuple[jax.Array, np.ndarray]:
  """One batch of N-digit addition problems as inputs: ``(x, label_digits)``.

  Args:
    images: ``(n, D)`` the pool of inputs.
    digit_labels: ``(n,)`` their classes.
    num_sums: B.
    num_digits: N.
    seed: numpy seed of :func:`~jaxpapers.nesy.addition_examples`.

  Returns:
    ``x`` ``(B, 2N, D)`` (a device array) and the ``(B, N + 1)`` numpy
    digits of the sums.

  Raises:
    ValueError: ``images`` and ``digit_labels`` differ in length (and
      :func:`~jaxpapers.nesy.addition_examples`'s errors).

  Example:
    >>> import numpy as np
    >>> x, labels = addition_batch(np.ones((10, 64)), np.arange(10), 4, 2,
    ...                            seed=0)
    >>> x.shape, labels.shape
    ((4, 4, 64), (4, 3))
  """
  if np.shape(images)[:1] != np.shape(digit_labels):
    raise ValueError(
        "images must be (n, D) with one of digit_labels (n,) per image; got"
        f" {np.shape(images)} and {np.shape(digit_labels)}.")
  problems, labels = addition_examples(digit_labels, num_sums, num_digits,
                                       seed=seed)
  return jnp.asarray(images)[problems], labels


def _check_optimizer(optimizer: Any) -> None:
  if not (callable(getattr(optimizer, "init", None))
          and callable(getattr(optimizer, "update", None))):
    raise TypeError("optimizer must be an optax GradientTransformation; got"
                    f" {type(optimizer).__name__}.")


def step_costs(images: np.ndarray, digit_labels: np.ndarray, *,
               num_digits: Sequence[int], enumerated: Sequence[int] = (),
               optimizer: optax.GradientTransformation,
               layer_sizes: Sequence[int] = (64, 128, 10),
               batch_size: int = 32, m_steps: int = 1, rounds: int = 7,
               repeats: int = 3) -> dict[str, Any]:
  """Wall time and compiled footprint of one training step, EM against its rivals.

  At each N of ``num_digits``: exact EM with the carry chain (``"em_exact"``)
  and the semantic loss (``"semantic"``); at each N of ``enumerated``: exact
  EM whose E-step enumerates the ``100^N`` worlds
  (:func:`~jaxpapers.nesy.addition_program`). Every step runs on
  one batch of ``batch_size`` sums (:func:`addition_batch`, seed 0) from a
  fresh state (key 0), once in each of ``rounds`` alternating rounds
  (:func:`jaxpapers.profiling.alternating_seconds`), so each ratio is taken
  within a round, under one load (:func:`jaxpapers.profiling.paired_ratio`:
  median and 10-90% spread).

  Args:
    images: ``(n, D)`` the pool of inputs.
    digit_labels: ``(n,)`` their classes.
    num_digits: the N of the carry-chain steps.
    enumerated: the N of the enumeration steps (1 or 2 fit a CPU).
    optimizer: an optax transformation.
    layer_sizes: the MLP's widths, ``(D, ..., 10)``.
    batch_size: sums per step.
    m_steps: EM's gradient steps per E-step.
    rounds: alternating rounds.
    repeats: timed calls per step and round (the fastest counts).

  Returns:
    A dict: ``chain`` maps ``str(N)`` to EM's :func:`~jaxpapers.profiling.paired_ratio` over the
    semantic loss with ``em_exact_seconds``, ``semantic_seconds``,
    ``em_exact_peak_bytes`` and ``semantic_peak_bytes``; ``enumeration`` maps
    ``str(N)`` to ``seconds``, ``peak_bytes`` and ``num_worlds``; seconds are
    medians over rounds, peak bytes
    :func:`jaxpapers.profiling.compiled_footprint`'s. ``paired`` holds
    ``em_per_digit`` (EM's time per digit at the largest N over the smallest,
    with ``n``) and ``em_exact_2_over_1`` / ``enumeration_2_over_1`` where
    both N = 1 and 2 were timed.

  Raises:
    ValueError: no N at all, an N < 1, or an enumerated N > 2; bad counts.

  Example:
    >>> import numpy as np, optax
    >>> costs = step_costs(np.ones((10, 64), np.float32), np.arange(10),
    ...                    num_digits=(1,), optimizer=optax.sgd(0.1),
    ...                    layer_sizes=(64, 8, 10), batch_size=4, rounds=1,
    ...                    repeats=1)
    >>> sorted(costs["chain"]["1"])[:3]
    ['em_exact_peak_bytes', 'em_exact_seconds', 'high']
  """
  for name, ns, high in (("num_digits", num_digits, None),
                         ("enumerated", enumerated, 2)):
    for n in ns:
      check_int(name, n, 1, high)
  if not (len(num_digits) or len(enumerated)):
    raise ValueError("num_digits and enumerated name no N to time.")
  for name, count in (("batch_size", batch_size), ("rounds", rounds),
                      ("repeats", repeats)):
    check_int(name, count, 1)

  def call(method, program, n, totals=False):
    step = make_train_step(method, program, optimizer, m_steps=m_steps)
    x, labels = addition_batch(images, digit_labels, batch_size, n, seed=0)
    if totals:  # the enumerated program's label is the sum itself
      labels = [digits_to_int(d) for d in labels]
    return jax.jit(step), (init_state(jax.random.key(0), optimizer,
                                      layer_sizes), jax.random.key(0), x,
                           jnp.asarray(labels, jnp.int32))

  calls = {f"{m}@{n}": call(m, DigitAddition(n), n) for n in num_digits
           for m in _PAIR}
  calls.update({f"enumeration@{n}": call("em_exact", addition_program(n), n,
                                         totals=True) for n in enumerated})
  seconds = profiling.alternating_seconds(calls, rounds=rounds,
                                          repeats=repeats)
  peak = {name: profiling.compiled_footprint(
      fn.lower(*args).compile())["peak_bytes"]
          for name, (fn, args) in calls.items()}
  return _summarize_costs(num_digits, enumerated, seconds, peak)


_PAIR = ("em_exact", "semantic")


def _summarize_costs(num_digits, enumerated, seconds, peak):
  median = {name: float(np.median(s)) for name, s in seconds.items()}
  pair = lambda a, b: profiling.paired_ratio(seconds[a], seconds[b])
  chain = {str(n): {**pair(f"em_exact@{n}", f"semantic@{n}"), **{
      f"{m}_{what}": table[f"{m}@{n}"] for what, table in (
          ("seconds", median), ("peak_bytes", peak)) for m in _PAIR}}
           for n in num_digits}
  enumeration = {str(n): {"seconds": median[f"enumeration@{n}"],
                          "peak_bytes": peak[f"enumeration@{n}"],
                          "num_worlds": 100**n} for n in enumerated}
  ns, paired = sorted(set(num_digits)), {}
  if len(ns) > 1:
    paired["em_per_digit"] = {"n": [ns[0], ns[-1]], **profiling.paired_ratio(
        np.asarray(seconds[f"em_exact@{ns[-1]}"]) / ns[-1],
        np.asarray(seconds[f"em_exact@{ns[0]}"]) / ns[0])}
  for name in ("em_exact", "enumeration"):
    if f"{name}@1" in seconds and f"{name}@2" in seconds:
      paired[f"{name}_2_over_1"] = pair(f"{name}@2", f"{name}@1")
  return {"chain": chain, "enumeration": enumeration, "paired": paired}
