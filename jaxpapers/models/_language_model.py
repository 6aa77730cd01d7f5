"""Byte-level language-model training on Python's own text.

The pieces an LM experiment needs besides its optimizer: the corpus (pydoc
topics prose and standard-library source, a fixed document split), the
shared :class:`jaxpapers.models.Transformer` viewed as a pure function of a
dict of params (:class:`LanguageModel`), a warmup-stable-decay schedule,
Muon's split of those params, an :class:`Optimizer` record for wrappers that
hold more than the params (:func:`lookahead`, :func:`schedule_free`), fixed
validation windows and a jitted validation loss, a ``lax.scan`` chunk of
training steps whose batches are pure functions of ``(data_key, step)``, so
a resumed run sees the same batches (:func:`train_chunk`), the jitted chunk
and two-point validation of an optimizer family (:class:`LMTrainer`), and
the steps a loss curve takes to reach a target (:func:`steps_to_reach`).
Any ``ffn_factory`` (e.g. a mixture of experts) plugs in; its auxiliary
outputs are averaged over the chunk.

Example:
  >>> import optax
  >>> from jaxpapers import models
  >>> model = models.LanguageModel(models.TransformerConfig(
  ...     max_len=8, d_model=8, num_heads=2, num_layers=1, d_ff=16))
  >>> tokens = jnp.arange(64, dtype=jnp.int32) % 7
  >>> opt = models.Optimizer(optax.sgd(0.1))
  >>> params = model.init(0)
  >>> params, state, loss, aux = models.train_chunk(
  ...     model.loss, opt, params, opt.tx.init(params), tokens,
  ...     jax.random.key(0), jnp.int32(0), num_steps=2, batch_size=2, length=8)
  >>> bool(jnp.isfinite(loss))
  True

References:
  Used by ``experiments/ema_nesterov.py`` and ``benchmarks/optim.py``; the
  warmup-stable-decay schedule follows Hu et al., "MiniCPM" (2024).
"""

import dataclasses
import functools
from typing import Any, Callable, NamedTuple

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxpapers import tree
from jaxpapers._checks import check_int
from jaxpapers._checks import check_real
from jaxpapers.data import _text as text
from jaxpapers.models import _transformer as transformer


class Corpus(NamedTuple):
  """Byte tokens of the training and validation documents, and where they came from."""

  train: np.ndarray  # int32 tokens (bytes and EOS)
  valid: np.ndarray
  provenance: str

  def arrays(self, num_valid_windows: int, length: int
             ) -> tuple[jax.Array, jax.Array]:
    """Training tokens on device and :func:`validation_windows` of ``valid``."""
    return (jnp.asarray(self.train),
            validation_windows(self.valid, num_valid_windows, length))


def load_corpus(*, source_files: int | None, valid_fraction: float,
                seed: int = 0) -> Corpus:
  """pydoc topics plus the first ``source_files`` stdlib files, split by document.

  Args:
    source_files: how many standard-library ``.py`` files follow the pydoc
      topics (None: all of them).
    valid_fraction: the fraction of documents held out, in ``(0, 1)``.
    seed: the seed of the fixed document split.

  Returns:
    A :class:`Corpus` of int32 byte tokens (documents closed by ``EOS``).

  Raises:
    ValueError: ``source_files`` not None or an int >= 1, or
      ``valid_fraction`` outside ``(0, 1)``.

  Example:
    >>> corpus = load_corpus(source_files=1, valid_fraction=0.3)
    >>> corpus.train.dtype, corpus.valid.ndim
    (dtype('int32'), 1)
  """
  if source_files is not None:
    check_int("source_files", source_files, 1)
  check_real("valid_fraction", valid_fraction, low=0.0, high=1.0,
             low_open=True, high_open=True)
  docs = text.python_docs_documents() + text.python_source_documents(source_files)
  train, valid = text.split_documents(docs, valid_fraction, seed=seed)
  provenance = text.provenance(
      f"{len(docs)} documents (pydoc topics + {source_files or 'all'} stdlib"
      f" files), {len(valid)} held out")
  return Corpus(text.encode_documents(train), text.encode_documents(valid),
                provenance)


class LanguageModel:
  """The nnx :class:`Transformer` as a pure function of a nested dict of params.

  Optimizers see plain nested dicts of arrays; :meth:`apply` merges them
  back into the module. Hashable by identity, so it can be a static
  argument of ``jax.jit`` (one compile per model).

  Args:
    config: the :class:`TransformerConfig` of the model.
    ffn_factory: the feed-forward block (default :func:`dense_ffn`; e.g. a
      mixture of experts, whose auxiliary outputs :meth:`loss` returns).

  Raises:
    TypeError: ``config`` not a :class:`TransformerConfig`, or
      ``ffn_factory`` not callable.

  Example:
    >>> model = LanguageModel(transformer.TransformerConfig(
    ...     max_len=8, d_model=8, num_heads=2, num_layers=1, d_ff=16))
    >>> loss, aux = model.loss(model.init(0), jnp.zeros((2, 9), jnp.int32))
    >>> loss.shape
    ()
  """

  def __init__(self, config: transformer.TransformerConfig, *,
               ffn_factory: transformer.FFNFactory = transformer.dense_ffn):
    if not isinstance(config, transformer.TransformerConfig):
      raise TypeError(f"config must be a models.TransformerConfig; got"
                      f" {type(config).__name__}.")
    if not callable(ffn_factory):
      raise TypeError(f"ffn_factory must be callable; got {ffn_factory!r}.")
    self.config = config
    self._ffn_factory = ffn_factory
    abstract = nnx.eval_shape(lambda: self._module(0))
    self._graphdef, state = nnx.split(abstract)
    self._treedef = jax.tree.structure(state)

  def _module(self, seed) -> transformer.Transformer:
    return transformer.Transformer(self.config, rngs=nnx.Rngs(seed),
                                   ffn_factory=self._ffn_factory)

  def init(self, seed: int) -> dict[str, Any]:
    """Fresh params as a nested dict of arrays (what optimizers see)."""
    return self._init(jax.random.key(seed))

  @functools.partial(jax.jit, static_argnums=0)
  def _init(self, key):
    # One compiled program instead of one per initializer op.
    _, state = nnx.split(self._module(key))
    return nnx.to_pure_dict(state)

  def apply(self, params: dict[str, Any], tokens_BxL: jax.Array):
    """``(logits_BxLxV, aux)``; attention stays inside documents."""
    state = jax.tree.unflatten(self._treedef, jax.tree.leaves(params))
    module = nnx.merge(self._graphdef, state)
    return module(tokens_BxL, text.segment_ids(tokens_BxL))

  def loss(self, params: dict[str, Any], windows_BxL1: jax.Array):
    """Next-token cross-entropy (nats/token) of ``(B, L+1)`` windows, and aux.

    Raises:
      ValueError: ``windows_BxL1`` not 2-D with at least 2 tokens per row.
    """
    if len(np.shape(windows_BxL1)) != 2 or np.shape(windows_BxL1)[1] < 2:
      raise ValueError(f"windows_BxL1 must have shape (B, L + 1) with L >= 1;"
                       f" got {np.shape(windows_BxL1)}.")
    logits, aux = self.apply(params, windows_BxL1[:, :-1])
    return transformer.next_token_loss(logits, windows_BxL1[:, 1:]), aux

  def metadata(self) -> dict[str, Any]:
    """What a report says about the model: architecture, sizes, parameters."""
    ffn = ("GELU MLP" if self._ffn_factory is transformer.dense_ffn else
           getattr(self._ffn_factory, "__name__", "custom FFN"))
    return {"architecture": "decoder-only transformer (jaxpapers.models."
                            "Transformer): pre-norm RMSNorm, learned positions,"
                            f" tied embeddings, {ffn}",
            "config": dataclasses.asdict(self.config),
            "num_params": sum(x.size for x in jax.tree.leaves(self.init(0)))}


def wsd_schedule(peak: float, *, num_steps: int, warmup_steps: int,
                 decay_start: int) -> optax.Schedule:
  """Warmup-stable-decay: linear warm-up, constant, linear decay to 0 at the end.

  Args:
    peak: the plateau value (may be traced).
    num_steps: the step at which the value reaches 0.
    warmup_steps: the linear warm-up length (``>= 1``).
    decay_start: where the linear decay starts, in ``[0, num_steps]``
      (``num_steps``: no decay before the end).

  Returns:
    An optax schedule ``step -> value``.

  Raises:
    ValueError: a step count out of range, or a non-finite concrete ``peak``.

  Example:
    >>> s = wsd_schedule(1.0, num_steps=10, warmup_steps=2, decay_start=6)
    >>> [round(float(s(t)), 2) for t in (0, 1, 5, 8)]
    [0.5, 1.0, 1.0, 0.5]
  """
  check_real("peak", peak, allow_traced=True)
  num_steps = check_int("num_steps", num_steps, 1)
  check_int("warmup_steps", warmup_steps, 1)
  check_int("decay_start", decay_start, 0, num_steps)

  def schedule(step):
    t = jnp.asarray(step).astype(jnp.float32)
    warm = (t + 1) / warmup_steps
    decay = (num_steps - t) / (num_steps - decay_start)
    return peak * jnp.clip(jnp.minimum(warm, decay), 0.0, 1.0)

  return schedule


def muon_dimension_numbers(params: dict[str, Any]) -> Any:
  """Muon for the 2-D hidden matrices; embeddings and vectors go to its Adam.

  Pass it as ``muon_weight_dimension_numbers`` of ``optax.contrib.muon`` for
  the params of a :class:`LanguageModel`.

  Args:
    params: a pytree of arrays (e.g. :meth:`LanguageModel.init`).

  Returns:
    The pytree of ``optax.contrib.MuonDimensionNumbers`` (2-D leaves whose
    path does not name an embedding) or None (every other leaf).

  Example:
    >>> dims = muon_dimension_numbers({"embed": jnp.ones((4, 2)),
    ...                                "w": jnp.ones((2, 2)), "b": jnp.ones(2)})
    >>> dims["embed"] is None, dims["w"] is not None, dims["b"] is None
    (True, True, True)
  """
  def dims(path, x):
    if x.ndim != 2 or "embed" in jax.tree_util.keystr(path):
      return None
    return optax.contrib.MuonDimensionNumbers()
  return jax.tree_util.tree_map_with_path(dims, params)


class Optimizer(NamedTuple):
  """An optax optimizer and how what it holds relates to the model's params.

  Wrappers such as ``optax.lookahead`` (fast and slow weights) or
  schedule-free and EMA-Nesterov (which hold a point other than the one to
  validate) differ from the plain case only in these three maps.
  """

  tx: optax.GradientTransformation
  # (held, opt_state) -> the params to validate.
  eval_params: Callable[[Any, Any], Any] = lambda held, opt_state: held
  # params -> what the optimizer holds.
  wrap_params: Callable[[Any], Any] = lambda params: params
  # held -> the params the gradient is taken at.
  gradient_point: Callable[[Any], Any] = lambda held: held


def _check_transformation(name: str, tx: Any) -> None:
  if not (callable(getattr(tx, "init", None))
          and callable(getattr(tx, "update", None))):
    raise TypeError(f"{name} must be an optax.GradientTransformation; got"
                    f" {type(tx).__name__}.")


def lookahead(fast: optax.GradientTransformation, sync_period: int,
              slow_step_size: float) -> Optimizer:
  """``optax.lookahead``: gradients at the fast weights, validation at the slow.

  Args:
    fast: the inner optimizer of the fast weights.
    sync_period: fast steps between two slow updates (``>= 1``).
    slow_step_size: the slow weights' step towards the fast, in ``(0, 1]``.

  Returns:
    An :class:`Optimizer` holding ``optax.LookaheadParams``.

  Raises:
    TypeError: ``fast`` not a gradient transformation.
    ValueError: ``sync_period`` or ``slow_step_size`` out of range.

  Example:
    >>> opt = lookahead(optax.sgd(1.0), sync_period=2, slow_step_size=0.5)
    >>> held = opt.wrap_params({"w": jnp.zeros(2)})
    >>> opt.eval_params(held, None)["w"].shape
    (2,)

  References:
    Zhang et al., "Lookahead Optimizer: k steps forward, 1 step back" (2019).
  """
  _check_transformation("fast", fast)
  check_int("sync_period", sync_period, 1)
  check_real("slow_step_size", slow_step_size, low=0.0, high=1.0,
             low_open=True)
  return Optimizer(optax.lookahead(fast, sync_period, slow_step_size),
                   eval_params=lambda held, opt_state: held.slow,
                   wrap_params=optax.LookaheadParams.init_synced,
                   gradient_point=lambda held: held.fast)


def schedule_free(tx: optax.GradientTransformation) -> Optimizer:
  """A schedule-free optax optimizer (e.g. ``schedule_free_adamw``), validated at x.

  Args:
    tx: an ``optax.contrib.schedule_free_*`` transformation (it holds y).

  Returns:
    An :class:`Optimizer` whose ``eval_params`` are the averaged iterate x.

  Raises:
    TypeError: ``tx`` not a gradient transformation.

  Example:
    >>> opt = schedule_free(optax.contrib.schedule_free_sgd(0.1))
    >>> params = {"w": jnp.zeros(2)}
    >>> opt.eval_params(params, opt.tx.init(params))["w"].shape
    (2,)

  References:
    Defazio et al., "The Road Less Scheduled" (2024).
  """
  _check_transformation("tx", tx)
  return Optimizer(tx, eval_params=lambda held, opt_state: (
      optax.contrib.schedule_free_eval_params(opt_state, held)))


def validation_windows(tokens: np.ndarray, num_windows: int, length: int,
                       seed: int = 0) -> jax.Array:
  """A fixed set of ``(num_windows, length + 1)`` windows (shared by all runs).

  Raises:
    ValueError: ``tokens`` not 1-D or too short, or a count below 1 (see
      :func:`jaxpapers.data.sample_windows`).

  Example:
    >>> validation_windows(np.arange(20, dtype=np.int32), 3, 4).shape
    (3, 5)
  """
  return text.sample_windows(jax.random.key(seed), jnp.asarray(tokens),
                             num_windows, length)


@functools.partial(jax.jit, static_argnames=("model", "batch_size"))
def mean_loss(model: LanguageModel, params, windows: jax.Array,
              batch_size: int) -> jax.Array:
  """Mean loss over ``windows``, ``batch_size`` at a time (a multiple of it).

  Jitted with the model static: one compile per model and window shape.

  Args:
    model: the :class:`LanguageModel`.
    params: its params.
    windows: ``(N, L + 1)`` token windows, ``N`` a multiple of ``batch_size``.
    batch_size: windows per forward pass.

  Returns:
    The mean next-token cross-entropy in nats per token.

  Raises:
    ValueError: ``batch_size`` not an int >= 1, or ``N`` not a multiple of it.

  Example:
    >>> model = LanguageModel(transformer.TransformerConfig(
    ...     max_len=4, d_model=8, num_heads=2, num_layers=1, d_ff=8))
    >>> float(mean_loss(model, model.init(0), jnp.zeros((4, 5), jnp.int32),
    ...                 2)) > 0
    True
  """
  check_int("batch_size", batch_size, 1)
  num = windows.shape[0]
  if num % batch_size:
    raise ValueError(
        f"the {num} validation windows must be a multiple of batch_size="
        f"{batch_size}.")
  batches = windows.reshape(num // batch_size, batch_size, -1)
  spec = tree.explicit_spec(windows)
  if spec is not None and spec[0] is not None:
    # Explicit axes map only over a replicated axis: each batch keeps the
    # windows' data-parallel sharding instead.
    batches = jax.sharding.reshard(batches, jax.P(None, spec[0], None))
  return jnp.mean(jax.lax.map(lambda w: model.loss(params, w)[0], batches))


def train_chunk(
    objective: Callable[[Any, jax.Array], tuple[jax.Array, dict[str, Any]]],
    optimizer: Optimizer,
    opt_params: Any,
    opt_state: optax.OptState,
    tokens: jax.Array,
    data_key: jax.Array,
    first_step: jax.Array,
    *,
    num_steps: int,
    batch_size: int,
    length: int,
):
  """``num_steps`` optimizer steps; returns (opt_params, opt_state, mean loss, mean aux).

  Batch ``t`` is drawn from ``fold_in(data_key, t)``; the gradient is taken
  at ``optimizer.gradient_point`` of what the optimizer holds (e.g. the fast
  weights of ``optax.lookahead``).

  Args:
    objective: ``(params, windows) -> (loss, aux)``, e.g.
      :meth:`LanguageModel.loss`.
    optimizer: the :class:`Optimizer`.
    opt_params: what the optimizer holds (``optimizer.wrap_params(params)``).
    opt_state: its state.
    tokens: the 1-D training token stream.
    data_key: the key batches are drawn from.
    first_step: the step of the first batch (may be traced).
    num_steps: steps in the chunk (``>= 1``, static).
    batch_size: windows per step (``>= 1``, static).
    length: tokens per window input (``>= 1``, static).

  Returns:
    ``(opt_params, opt_state, mean loss, mean aux)`` over the chunk.

  Raises:
    ValueError: a count below 1, or ``tokens`` not 1-D or too short.
    TypeError: ``optimizer`` not an :class:`Optimizer`.

  Example: see the module docstring.
  """
  if not isinstance(optimizer, Optimizer):
    raise TypeError(f"optimizer must be a models.Optimizer; got"
                    f" {type(optimizer).__name__}.")
  check_int("num_steps", num_steps, 1)
  check_int("batch_size", batch_size, 1)
  check_int("length", length, 1)

  def step(carry, t):
    opt_params, opt_state = carry
    windows = text.sample_windows(jax.random.fold_in(data_key, t), tokens,
                                  batch_size, length)
    (loss, aux), grads = jax.value_and_grad(objective, has_aux=True)(
        optimizer.gradient_point(opt_params), windows)
    updates, opt_state = optimizer.tx.update(grads, opt_state, opt_params)
    return (optax.apply_updates(opt_params, updates), opt_state), (loss, aux)

  steps = first_step + jnp.arange(num_steps, dtype=jnp.int32)
  (opt_params, opt_state), (losses, aux) = jax.lax.scan(
      step, (opt_params, opt_state), steps)
  return (opt_params, opt_state, jnp.mean(losses),
          jax.tree.map(jnp.mean, aux))


class LMTrainer:
  """Jitted training chunks of a :class:`LanguageModel`; validation at two points.

  The optimizer is a family ``make_optimizer(*hyper) -> Optimizer`` whose
  hyperparameters are traced inside the jitted programs, so every member of
  the family (e.g. a grid over EMA-Nesterov's ``beta_max`` and ``gamma``)
  shares one compiled chunk. :meth:`validate` gives the validation loss at
  the optimizer's evaluation point (what it reports: slow weights,
  schedule-free ``x``, EMA-Nesterov's anchor) and at its gradient point
  (where the gradient is taken); one compiled :func:`mean_loss` serves every
  trainer of the model, only the cheap maps to the two points compile per
  trainer. Hashable by identity (a static ``jit`` argument): build one per
  model and optimizer family and reuse it.

  Args:
    model: the :class:`LanguageModel`.
    make_optimizer: ``(*hyper) -> Optimizer``; called with the Python values
      given to :meth:`init` and with float32 arrays inside :meth:`chunk`
      and :meth:`validate`.
    chunk_steps: optimizer steps per :meth:`chunk` (``>= 1``).
    batch_size: training windows per step (``>= 1``).
    length: tokens per training window input (``>= 1``).

  Raises:
    TypeError: ``model`` not a :class:`LanguageModel`, or
      ``make_optimizer`` not callable (or, at :meth:`init`, not returning an
      :class:`Optimizer`).
    ValueError: a count below 1.

  Example:
    >>> model = LanguageModel(transformer.TransformerConfig(
    ...     max_len=8, d_model=8, num_heads=2, num_layers=1, d_ff=16))
    >>> trainer = LMTrainer(model, lambda lr: Optimizer(optax.sgd(lr)),
    ...                     chunk_steps=2, batch_size=2, length=8)
    >>> state = trainer.init(0, 0.1)
    >>> tokens = jnp.arange(64, dtype=jnp.int32) % 7
    >>> state, loss = trainer.chunk(state, (0.1,), tokens, jax.random.key(0), 0)
    >>> windows = tokens[:18].reshape(2, 9)
    >>> at_eval, at_grad = trainer.validate(state, (0.1,), windows, 2)
    >>> bool(at_eval == at_grad)  # plain SGD validates where it steps
    True

  References:
    Used by ``experiments/ema_nesterov.py``; the two points follow
    :class:`Optimizer` (``eval_params`` and ``gradient_point``).
  """

  def __init__(self, model: LanguageModel,
               make_optimizer: Callable[..., Optimizer], *, chunk_steps: int,
               batch_size: int, length: int):
    if not isinstance(model, LanguageModel):
      raise TypeError(f"model must be a models.LanguageModel; got"
                      f" {type(model).__name__}.")
    if not callable(make_optimizer):
      raise TypeError(f"make_optimizer must be callable; got"
                      f" {make_optimizer!r}.")
    self.model, self.make_optimizer = model, make_optimizer
    self.chunk_steps = check_int("chunk_steps", chunk_steps, 1)
    self.batch_size = check_int("batch_size", batch_size, 1)
    self.length = check_int("length", length, 1)

  def _optimizer(self, hyper) -> Optimizer:
    optimizer = self.make_optimizer(*hyper)
    if not isinstance(optimizer, Optimizer):
      raise TypeError(f"make_optimizer must return a models.Optimizer; got"
                      f" {type(optimizer).__name__}.")
    return optimizer

  def init(self, seed: int, *hyper: Any) -> tuple[Any, optax.OptState]:
    """``(opt_params, opt_state)`` of fresh params (``model.init(seed)``)."""
    optimizer = self._optimizer(hyper)
    opt_params = optimizer.wrap_params(self.model.init(seed))
    return opt_params, jax.jit(optimizer.tx.init)(opt_params)

  def chunk(self, state: tuple[Any, optax.OptState], hyper: tuple[Any, ...],
            tokens: jax.Array, data_key: jax.Array, first_step: Any):
    """``chunk_steps`` steps from ``first_step``: ``(state, mean loss)``.

    ``state`` is ``(opt_params, opt_state)``; batches as in
    :func:`train_chunk` (``fold_in(data_key, step)``).
    """
    return self._chunk(state, _float32s(hyper), tokens, data_key,
                       jnp.int32(first_step))

  @functools.partial(jax.jit, static_argnums=0)
  def _chunk(self, state, hyper, tokens, data_key, first_step):
    params, opt_state, loss, _ = train_chunk(
        self.model.loss, self._optimizer(hyper), *state, tokens, data_key,
        first_step, num_steps=self.chunk_steps, batch_size=self.batch_size,
        length=self.length)
    return (params, opt_state), loss

  def validate(self, state: tuple[Any, optax.OptState], hyper: tuple[Any, ...],
               windows: jax.Array, batch_size: int
               ) -> tuple[jax.Array, jax.Array]:
    """:func:`mean_loss` (nats/token) at the evaluation and the gradient point."""
    return tuple(mean_loss(self.model, p, windows, batch_size)
                 for p in self._points(state, _float32s(hyper)))

  @functools.partial(jax.jit, static_argnums=0)
  def _points(self, state, hyper):
    optimizer = self._optimizer(hyper)
    return (optimizer.eval_params(*state),
            optimizer.gradient_point(state[0]))


def _float32s(hyper: Any) -> tuple[jax.Array, ...]:
  return tuple(jnp.float32(h) for h in hyper)


def steps_to_reach(records: list[dict[str, Any]], target: float, *,
                   key: str = "valid_bpb") -> float | None:
  """First step at which ``record[key] <= target``, or None if never.

  ``records`` are evaluations in step order (dicts with ``"step"``, as a
  harness run's metrics); between two evaluations the step is interpolated
  linearly, as in "steps to reach the baseline's final loss" comparisons.

  Raises:
    ValueError: a record without ``"step"`` or ``key``, or steps not in
      increasing order.

  Example:
    >>> steps_to_reach([{"step": 0, "valid_bpb": 5.0},
    ...                 {"step": 10, "valid_bpb": 3.0}], 4.0)
    5.0
  """
  for r in records:
    if "step" not in r or key not in r:
      raise ValueError(f"every record needs 'step' and {key!r}; got keys"
                       f" {sorted(r)}.")
  steps = [r["step"] for r in records]
  if any(b <= a for a, b in zip(steps, steps[1:])):
    raise ValueError(f"records must be in increasing step order; got steps"
                     f" {steps}.")
  losses = [r[key] for r in records]
  for i, loss in enumerate(losses):
    if loss <= target:
      if i == 0:
        return float(steps[0])
      frac = (losses[i - 1] - target) / (losses[i - 1] - loss)
      return steps[i - 1] + frac * (steps[i] - steps[i - 1])
  return None
