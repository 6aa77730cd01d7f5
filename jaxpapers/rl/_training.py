r"""One GRPO / ECHO update on the shell, a warm-start step and the evaluation.

:func:`rl_step` is on-policy GRPO as ECHO trains it (Shrivastava et al.,
2026): ``tasks_per_step`` tasks, ``group_size`` rollouts each at the
sampling temperature (:func:`jaxpapers.rl.rollout_sample`), group-relative
advantages, then **one** forward pass over the transcripts whose token
log-probabilities feed both the PPO-clip term and ``lam`` times the
environment cross-entropy (:func:`jaxpapers.rl.echo_loss`); one
optimizer update per batch (so the ratio is 1 and the old log-probs are the
same values without gradient). ``world_model_only`` drops the action tokens:
the update is the environment term alone, rewards unused.

:func:`warm_start_step` is next-token pretraining on transcripts of a
random-command policy (syntax and observations, never solutions: solved
transcripts get zero weight). :func:`evaluate` gives held-out pass@1 and the
environment cross-entropy of a fixed set of transcripts. :func:`warm_start_chunk`
scans warm-start steps; :func:`multi_run` trains and evaluates several runs
(one ``lam``, ``world_model_only`` flag and seed each) in one vmapped state.

All functions are pure (jit / vmap over runs); the model is an
``nnx.split`` pair ``(graphdef, params)``.
"""

import dataclasses
import functools
import math
from typing import Any, Callable, NamedTuple, Sequence

from flax import nnx
import jax
import jax.numpy as jnp
import optax

from jaxpapers import models
from jaxpapers import tree
from jaxpapers import _checks
from jaxpapers.data import _sampling as sampling
from jaxpapers.rl import _echo as echo
from jaxpapers.rl import _grpo as grpo
from jaxpapers.rl import _rollout as rollout
from jaxpapers.rl import _shell as shell


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class RLConfig:
  """Static settings of :func:`rl_step` (the paper's defaults), validated here.

  ``clip_low`` / ``clip_high`` may be ``inf`` (no clipping on that side).
  """

  tasks_per_step: int = 8
  group_size: int = 8
  temperature: float = 0.8
  clip_low: float = 0.2
  clip_high: float = 0.2
  mask_mode: str = "env_only"
  std_normalize: bool = True

  def __post_init__(self):
    _checks.check_int("tasks_per_step", self.tasks_per_step, 1)
    _checks.check_int("group_size", self.group_size, 1)
    if self.group_size < 2:
      raise ValueError(f"group_size must be >= 2 (GRPO needs a group baseline);"
                       f" got {self.group_size}.")
    _checks.check_real("temperature", self.temperature,
                       low=0.0, low_open=True, allow_traced=True)
    _checks.check_real("clip_low", self.clip_low,
                       low=0.0, low_open=True, finite=False, allow_traced=True)
    _checks.check_real("clip_high", self.clip_high,
                       low=0.0, low_open=True, finite=False, allow_traced=True)
    if self.mask_mode not in echo.MASK_MODES:
      raise ValueError(f"mask_mode must be one of {echo.MASK_MODES}; got"
                       f" {self.mask_mode!r}.")
    if not isinstance(self.std_normalize, bool):
      raise TypeError(f"std_normalize must be a bool; got"
                      f" {self.std_normalize!r}.")


def optimizer(learning_rate: float = 3e-4, warmup_steps: int = 20,
              clip_norm: float = 0.2, weight_decay: float = 0.01
              ) -> optax.GradientTransformation:
  """Global-norm clipping then AdamW (0.9, 0.999) after a linear warm-up.

  ``warmup_steps=0`` is no warm-up. Raises unless ``learning_rate`` and
  ``clip_norm`` are finite and > 0, ``weight_decay`` finite and >= 0 and
  ``warmup_steps`` an int >= 0.
  """
  _checks.check_real("learning_rate", learning_rate,
                     low=0.0, low_open=True, allow_traced=True)
  _checks.check_int("warmup_steps", warmup_steps, 0)
  _checks.check_real("clip_norm", clip_norm,
                     low=0.0, low_open=True, allow_traced=True)
  _checks.check_real("weight_decay", weight_decay, low=0.0, allow_traced=True)
  # optax's warm-up over 0 steps stays at its initial value (0) for ever.
  schedule = (optax.constant_schedule(learning_rate) if warmup_steps == 0
              else optax.warmup_constant_schedule(0.0, learning_rate,
                                                  warmup_steps))
  return optax.chain(
      optax.clip_by_global_norm(clip_norm),
      optax.adamw(schedule, b1=0.9, b2=0.999, weight_decay=weight_decay))


def transcript_log_probs(graphdef: nnx.GraphDef, params: Any,
                         tokens_BxL: jax.Array, temperature) -> jax.Array:
  """One forward pass: log-probs of ``tokens[:, 1:]`` at ``temperature``, ``[B, L-1]``."""
  logits, _ = nnx.merge(graphdef, params)(tokens_BxL[:, :-1])
  return echo.token_log_probs(logits, tokens_BxL[:, 1:],
                              temperature=temperature)


def rl_loss(params, graphdef, transcripts: shell.Transcripts, advantages_B,
            lam, world_model_only, layout: shell.ShellLayout, config: RLConfig):
  """ECHO's loss of sampled transcripts (``lam = 0``: GRPO alone)."""
  log_probs = transcript_log_probs(graphdef, params, transcripts.tokens,
                                   config.temperature)
  masks = echo.shift_for_next_token(echo.echo_masks(
      transcripts.spans, length=layout.length, mode=config.mask_mode))
  batch = transcripts.tokens.shape[0]
  masks = echo.world_model_only(
      masks, jnp.broadcast_to(jnp.asarray(world_model_only), (batch,)))
  return echo.echo_loss(log_probs, jax.lax.stop_gradient(log_probs),
                        advantages_B, masks, lam=lam,
                        clip_low=config.clip_low, clip_high=config.clip_high)


def rl_step(graphdef: nnx.GraphDef, params: Any, opt_state: Any,
            key: jax.Array, pool: shell.Tasks, lam: jax.Array,
            world_model_only: jax.Array, tx: optax.GradientTransformation,
            layout: shell.ShellLayout, config: RLConfig):
  """One on-policy update; returns ``(params, opt_state, metrics)``.

  Args:
    graphdef, params: the policy (``nnx.split``).
    opt_state: ``tx``'s state.
    key: this step's PRNG key (tasks and sampling).
    pool: the training tasks to draw from (at least one).
    lam: the environment-loss weight this step (finite, >= 0; a traced NaN
      makes the loss and the parameters NaN).
    world_model_only: bool scalar: drop the policy term (verifier-free).
    tx: the optimizer.
    layout, config: static settings.
  """
  _check_pool(pool, "pool")
  task_key, sample_key = jax.random.split(key)
  num_pool = pool.prompt.shape[0]
  chosen = jax.random.choice(task_key, num_pool, (config.tasks_per_step,),
                             replace=num_pool < config.tasks_per_step)
  group_ids = jnp.repeat(jnp.arange(config.tasks_per_step), config.group_size)
  tasks = _draw(pool, chosen[group_ids])
  transcripts = rollout.sample_split(
      graphdef, jax.lax.stop_gradient(params), tasks, sample_key, layout,
      temperature=config.temperature)
  advantages = grpo.grpo_advantages(transcripts.reward, group_ids,
                                    std_normalize=config.std_normalize)
  (loss, aux), grads = jax.value_and_grad(rl_loss, has_aux=True)(
      params, graphdef, transcripts, advantages, lam, world_model_only,
      layout, config)
  updates, opt_state = tx.update(grads, opt_state, params)
  return optax.apply_updates(params, updates), opt_state, {
      "loss": loss, **aux, "reward": jnp.mean(transcripts.reward),
      "solved": jnp.mean(transcripts.solved.astype(jnp.float32))}


def _check_pool(pool: shell.Tasks, name: str) -> None:
  if pool.prompt.ndim != 2 or pool.prompt.shape[0] < 1:
    raise ValueError(f"{name} must hold at least one task (prompt [N >= 1,"
                     f" P]); got prompt shape {pool.prompt.shape}.")


def _draw(pool: shell.Tasks, indices: jax.Array) -> shell.Tasks:
  """``sampling.take(pool, indices)``, the draws sharded like the pool's batch.

  On Explicit mesh axes the draws take the sharding of ``indices``; drawn
  here they are replicated, which would leave the rollouts no batch axis
  and parameters sharded along the batch's axes (FSDP) none to be gathered
  along. A count that those axes do not divide stays replicated.
  """
  spec = tree.explicit_spec(pool.prompt)
  if spec is not None:
    mesh = jax.typeof(pool.prompt).sharding.mesh
    if indices.shape[0] % math.prod(
        mesh.shape[name] for name in tree.spec_axes(spec[0])) == 0:
      indices = jax.sharding.reshard(indices, jax.P(spec[0]))
  return sampling.take(pool, indices)


def random_transcripts(key: jax.Array, pool: shell.Tasks, batch: int,
                       layout: shell.ShellLayout) -> shell.Transcripts:
  """``batch`` transcripts of the random-command policy on tasks from ``pool``.

  Each turn draws a command kind uniformly (``ls``, ``cat``, ``set``,
  ``mv``, ``rm``, ``sum`` or malformed), then a command of that kind
  uniformly (:func:`jaxpapers.rl.command_table`). Raises unless
  ``batch`` is an int >= 1 and ``pool`` holds a task.
  """
  _checks.check_int("batch", batch, 1)
  _check_pool(pool, "pool")
  table, kinds = shell.command_table(layout)
  num_kinds = int(kinds.max()) + 1
  first = jnp.asarray([list(kinds).index(k) for k in range(num_kinds)])
  count = jnp.asarray([int((kinds == k).sum()) for k in range(num_kinds)])
  task_key, kind_key, which_key = jax.random.split(key, 3)
  shape = (batch, layout.num_turns)
  kind = jax.random.randint(kind_key, shape, 0, num_kinds)
  offset = jnp.floor(jax.random.uniform(which_key, shape) * count[kind])
  command = first[kind] + offset.astype(jnp.int32)
  tasks = _draw(pool, jax.random.randint(task_key, (batch,), 0,
                                         pool.prompt.shape[0]))
  return shell.scripted(tasks, jnp.asarray(table)[command], layout)


def pretraining_mask(transcripts: shell.Transcripts, layout: shell.ShellLayout):
  """Next-token targets of warm start: action and body tokens of unsolved rows."""
  masks = echo.shift_for_next_token(echo.echo_masks(
      transcripts.spans, length=layout.length))
  return (masks.action | masks.body) & ~transcripts.solved[:, None]


def warm_start_step(graphdef, params, opt_state, key, pool: shell.Tasks,
                    tx: optax.GradientTransformation, layout: shell.ShellLayout,
                    batch: int):
  """One next-token step on random-command transcripts; ``(params, opt_state, loss)``."""
  transcripts = random_transcripts(key, pool, batch, layout)
  mask = pretraining_mask(transcripts, layout)

  def loss_fn(params):
    logits, _ = nnx.merge(graphdef, params)(transcripts.tokens[:, :-1])
    return models.next_token_loss(logits, transcripts.tokens[:, 1:], mask)

  loss, grads = jax.value_and_grad(loss_fn)(params)
  updates, opt_state = tx.update(grads, opt_state, params)
  return optax.apply_updates(params, updates), opt_state, loss


def evaluate(graphdef, params, key, held_out: shell.Tasks,
             probe: shell.Transcripts, layout: shell.ShellLayout, *,
             temperature: float, samples: int) -> dict[str, jax.Array]:
  """Held-out pass@1 and environment cross-entropy (nats per token).

  ``pass_at_1``: the mean success of ``samples`` rollouts per held-out task
  at ``temperature``; ``env_ce``: :func:`jaxpapers.rl.env_loss`
  (``env_only``, temperature 1) of the fixed ``probe`` transcripts, the same
  for every policy. Raises unless ``samples`` is an int >= 1, the
  ``temperature`` finite and > 0 and ``held_out`` holds a task.
  """
  _checks.check_int("samples", samples, 1)
  _check_pool(held_out, "held_out")
  index = jnp.tile(jnp.arange(held_out.prompt.shape[0]), samples)
  out = rollout.sample_split(graphdef, params, _draw(held_out, index), key,
                             layout, temperature=temperature)
  log_probs = transcript_log_probs(graphdef, params, probe.tokens, 1.0)
  masks = echo.shift_for_next_token(echo.echo_masks(
      probe.spans, length=layout.length))
  return {"pass_at_1": jnp.mean(out.solved.astype(jnp.float32)),
          "reward": jnp.mean(out.reward),
          "env_ce": echo.env_loss(log_probs, masks)}


def warm_start_chunk(graphdef: nnx.GraphDef, pool: shell.Tasks,
                     tx: optax.GradientTransformation, layout: shell.ShellLayout,
                     batch: int, key: jax.Array) -> Callable[..., Any]:
  """A jitted ``lax.scan`` of :func:`warm_start_step`: ``chunk(state, t0, n)``.

  ``state`` is ``(params, opt_state)``; step ``t`` (``t0`` may be traced,
  the length ``n`` is static) draws its transcripts with ``fold_in(key, t)``,
  so a resumed run repeats the same batches. Returns ``(state, losses[n])``.

  Args:
    graphdef: the model's ``nnx.split`` graph.
    pool: the tasks to draw transcripts from (at least one).
    tx: the optimizer.
    layout: the shell layout (static).
    batch: transcripts per step (an int >= 1).
    key: the PRNG key the steps fold their index into.

  Raises:
    ValueError: ``batch`` not an int >= 1 or ``pool`` empty.

  Example:
    >>> chunk = warm_start_chunk(graphdef, pool, tx, layout, 16,
    ...                          key)  # doctest: +SKIP
    >>> state, losses = chunk(state, jnp.int32(0), 10)  # doctest: +SKIP

  References:
    Used by ``experiments/echo.py`` (Shrivastava et al., 2026, warm start).
  """
  _checks.check_int("batch", batch, 1)
  _check_pool(pool, "pool")

  @functools.partial(jax.jit, static_argnames="length")
  def chunk(state, first, length):
    def body(state, step):
      *state, loss = warm_start_step(graphdef, *state,
                                     jax.random.fold_in(key, step), pool, tx,
                                     layout, batch)
      return tuple(state), loss
    return jax.lax.scan(body, state, first + jnp.arange(length))
  return chunk


class MultiRun(NamedTuple):
  """The jitted programs of :func:`multi_run` (every run in one vmapped state).

  ``evaluate(params_R, step)``: :func:`evaluate` of each run, metrics ``[R]``.
  ``chunk(state_R, first, n)``: ``n`` (static) :func:`rl_step` steps
  of every run from step ``first``; ``(state_R, metrics [R] averaged over
  the steps)``; ``state_R`` is ``(params, opt_state)`` stacked over runs.
  """

  evaluate: Callable[..., dict[str, jax.Array]]
  chunk: Callable[..., Any]


def multi_run(graphdef: nnx.GraphDef,
              tasks: tuple[shell.Tasks, shell.Tasks, shell.Transcripts],
              tx: optax.GradientTransformation, layout: shell.ShellLayout,
              config: RLConfig, *, lam: Sequence[float],
              world_model_only: Sequence[bool], seeds: Sequence[int],
              lambda_scale: Callable[[jax.Array], Any] = lambda step: 1.0,
              eval_temperature: float, eval_samples: int) -> MultiRun:
  """GRPO / ECHO runs trained together: one vmapped :func:`rl_step` per step.

  Run ``r`` has weight ``lam[r] * lambda_scale(step)``, flag
  ``world_model_only[r]`` and seed ``seeds[r]``: its step ``t`` uses
  ``fold_in(key(seed), t)`` and its evaluation after step ``t``
  ``fold_in(key(seed), 10_000 + t)``, so a run's numbers do not depend on
  the other runs in the batch (up to floating-point reassociation).

  Args:
    graphdef: the policy's ``nnx.split`` graph.
    tasks: ``(train, held_out, probe)``: the training pool, the held-out
      tasks and the fixed probe transcripts of :func:`evaluate`.
    tx: the optimizer (vmapped: one state per run).
    layout, config: static settings of :func:`rl_step`.
    lam: the environment-loss weight of each run (finite, >= 0).
    world_model_only: each run's flag (drop the policy term).
    seeds: each run's seed.
    lambda_scale: ``step -> factor`` of ``lam`` (e.g.
      :func:`jaxpapers.rl.lambda_schedule`); default constant 1.
    eval_temperature, eval_samples: :func:`evaluate`'s settings.

  Returns:
    A :class:`MultiRun` of the jitted ``evaluate`` and ``chunk``.

  Raises:
    ValueError: no runs, ``lam``, ``world_model_only`` and ``seeds`` of
      different lengths, a negative or non-finite ``lam``, an empty pool, or
      ``eval_samples`` not an int >= 1.
    TypeError: ``lambda_scale`` not callable, or ``config`` not an RLConfig.

  Example:
    >>> runs = multi_run(
    ...     graphdef, (train, held_out, probe), tx, layout, RLConfig(),
    ...     lam=[0.0, 0.05], world_model_only=[False, False], seeds=[0, 0],
    ...     eval_temperature=0.6, eval_samples=1)  # doctest: +SKIP
    >>> state, metrics = runs.chunk(state, jnp.int32(0), 10)  # doctest: +SKIP

  References:
    Shrivastava et al., "ECHO" (2026); used by ``experiments/echo.py``.
  """
  if not len(lam) == len(world_model_only) == len(seeds) >= 1:
    raise ValueError(f"lam, world_model_only and seeds need one entry per run"
                     f" (at least one); got {len(lam)},"
                     f" {len(world_model_only)} and {len(seeds)}.")
  for value in lam:
    _checks.check_real("lam", value, low=0.0)
  if not callable(lambda_scale):
    raise TypeError(f"lambda_scale must be callable; got {lambda_scale!r}.")
  if not isinstance(config, RLConfig):
    raise TypeError(f"config must be a training.RLConfig; got"
                    f" {type(config).__name__}.")
  _checks.check_int("eval_samples", eval_samples, 1)
  train, held_out, probe = tasks
  _check_pool(train, "train")
  _check_pool(held_out, "held_out")
  lam = jnp.asarray(lam, jnp.float32)
  world_only = jnp.asarray(world_model_only)
  seed_keys = jnp.stack([jax.random.key_data(jax.random.key(s))
                         for s in seeds])

  @jax.jit
  def evaluate_runs(params, step):
    def one(p, key_data):
      key = jax.random.fold_in(jax.random.wrap_key_data(key_data),
                               10_000 + step)
      return evaluate(graphdef, p, key, held_out, probe, layout,
                      temperature=eval_temperature, samples=eval_samples)
    return jax.vmap(one)(params, seed_keys)

  @functools.partial(jax.jit, static_argnames="length")
  def chunk(state, first, length):
    def body(state, step):
      def one(p, o, key_data, lam_r, world_r):
        key = jax.random.fold_in(jax.random.wrap_key_data(key_data), step)
        return rl_step(graphdef, p, o, key, train, lam_r * lambda_scale(step),
                       world_r, tx, layout, config)
      *state, metrics = jax.vmap(one)(*state, seed_keys, lam, world_only)
      return tuple(state), metrics
    state, metrics = jax.lax.scan(body, state, first + jnp.arange(length))
    return state, jax.tree.map(lambda m: jnp.mean(m, 0), metrics)

  return MultiRun(evaluate_runs, chunk)
