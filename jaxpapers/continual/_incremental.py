r"""Class-incremental training of an adapter + cosine head on frozen features.

Pure functions around :class:`~jaxpapers.continual.LowRankAdapter` and
:class:`~jaxpapers.continual.CosineClassifier`: parameters are plain dicts
``{"adapter": ..., "head": ...}`` (``nnx.to_pure_dict``) and the modules'
``nnx.GraphDef`` pair (:class:`Graphs`) is a static argument. Classes are
numbered in order of arrival; with ``num_seen`` classes seen, logits of later
classes are masked out, and the head rows of the first ``num_frozen``
classes are kept fixed while a task trains (the protocol of TUNA, ICCV
2025, https://github.com/Ngahoang2005/ICCV2025-TUNA).

Metrics follow the class-incremental literature (Rebuffi et al., 2017,
https://arxiv.org/abs/1611.07725; Chaudhry et al., 2018,
https://arxiv.org/abs/1801.10112): average incremental accuracy (mean over
steps of accuracy on every class seen so far), final accuracy, and average
forgetting (best earlier accuracy on a task's classes minus the final one).
"""

import dataclasses
import functools
from typing import Any, NamedTuple

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxpapers import tree
from jaxpapers._checks import check_int
from jaxpapers._checks import check_real
from jaxpapers._checks import is_concrete
from jaxpapers.continual._adapter import CosineClassifier
from jaxpapers.continual._adapter import LowRankAdapter
from jaxpapers.curvature._fisher import diagonal_fisher

Params = dict[str, Any]
MASKED_LOGIT = -1e9


class Graphs(NamedTuple):
  """The static structure of the adapter and the head (each an ``nnx.GraphDef``)."""

  adapter: Any
  head: Any


@dataclasses.dataclass(frozen=True)
class TaskTraining:
  """SGD of one task (TUNA-style defaults), validated at construction."""

  epochs: int = 15
  batch_size: int = 16
  learning_rate: float = 0.01
  momentum: float = 0.9
  weight_decay: float = 5e-4

  def __post_init__(self):
    check_int("epochs", self.epochs, 1)
    check_int("batch_size", self.batch_size, 1)
    check_real("learning_rate", self.learning_rate, low=0.0, low_open=True)
    check_real("momentum", self.momentum, low=0.0)
    check_real("weight_decay", self.weight_decay, low=0.0)
    if not self.momentum < 1:
      raise ValueError(f"need 0 <= momentum < 1; got {self.momentum}.")


def init_learner(key: jax.Array, features: int, rank: int, num_classes: int,
                 *, scale: float = 20.0) -> tuple[Graphs, Params]:
  """Graphs and initial parameters of an adapter (rank ``rank``) and a head.

  Example:
    >>> import jax
    >>> from jaxpapers import continual
    >>> graphs, params = continual.init_learner(jax.random.key(0), 8, 2, 4)
    >>> sorted(params["adapter"]), sorted(params["head"])
    (['down_DxR', 'up_RxD'], ['prototypes_CxD'])
  """
  adapter_key, head_key = jax.random.split(key)
  adapter_def, adapter = nnx.split(
      LowRankAdapter(features, rank, rngs=nnx.Rngs(adapter_key)))
  head_def, head = nnx.split(
      CosineClassifier(features, num_classes, scale=scale,
                       rngs=nnx.Rngs(head_key)))
  return Graphs(adapter_def, head_def), {"adapter": nnx.to_pure_dict(adapter),
                                         "head": nnx.to_pure_dict(head)}


def _check_class_count(params: Params, name: str, value: jax.Array | int,
                       low: int) -> None:
  """A concrete class count in [low, C]; a traced one is taken as given."""
  num_classes = params["head"]["prototypes_CxD"].shape[0]
  if isinstance(value, jax.core.Tracer):
    return
  if np.ndim(value) != 0 or not np.issubdtype(np.asarray(value).dtype,
                                              np.integer):
    raise TypeError(f"{name} must be an int class count; got {value!r}.")
  if not low <= int(value) <= num_classes:
    raise ValueError(f"{name} must lie in [{low}, {num_classes}] (the head's"
                     f" classes); got {int(value)}.")


def _check_task(x_NxD: jax.Array, labels_N: jax.Array, weights_N: jax.Array,
                params: Params, num_seen: jax.Array | int, *,
                binary_weights: bool = False) -> None:
  """Shapes and dtypes; concrete labels and weights also by value.

  Weights must be finite and ``>= 0`` (in ``{0, 1}`` with
  ``binary_weights``); the labels of rows of nonzero weight must lie in
  ``[0, num_seen)`` (``[0, C)`` while ``num_seen`` is traced). A row of
  weight 0 (padding) adds no gradient whatever its label.
  """
  if x_NxD.ndim != 2:
    raise ValueError(f"x_NxD must be (N, D) features; got {x_NxD.shape}.")
  num = x_NxD.shape[0]
  if labels_N.shape != (num,) or not jnp.issubdtype(labels_N.dtype,
                                                    jnp.integer):
    raise ValueError(f"labels_N must be ({num},) int class ids; got"
                     f" {labels_N.dtype}{list(labels_N.shape)}.")
  if weights_N.shape != (num,) or not jnp.issubdtype(weights_N.dtype,
                                                     jnp.floating):
    raise ValueError(f"weights_N must be ({num},) float row weights; got"
                     f" {weights_N.dtype}{list(weights_N.shape)}.")
  if not is_concrete(weights_N):
    return
  weights = np.asarray(weights_N)
  ok = ((weights == 0) | (weights == 1) if binary_weights
        else np.isfinite(weights) & (weights >= 0))
  if not np.all(ok):
    expected = "in {0, 1}" if binary_weights else "finite and >= 0"
    raise ValueError(f"weights_N must be {expected}; got"
                     f" {weights[~ok][:5].tolist()}.")
  if is_concrete(labels_N):
    high = (int(num_seen) if is_concrete(num_seen)
            else params["head"]["prototypes_CxD"].shape[0])
    labels = np.asarray(labels_N)[weights != 0]
    bad = labels[(labels < 0) | (labels >= high)]
    if bad.size:
      raise ValueError(f"labels_N of rows of nonzero weight must lie in"
                       f" [0, {high}) (the seen classes); got"
                       f" {bad[:5].tolist()}.")


def logits(graphs: Graphs, params: Params, x_BxD: jax.Array,
           num_seen: jax.Array | int) -> jax.Array:
  """Head logits of the adapted features; classes ``>= num_seen`` masked out.

  A concrete ``num_seen`` must lie in [1, C].
  """
  _check_class_count(params, "num_seen", num_seen, 1)
  features_BxD = nnx.merge(graphs.adapter, params["adapter"])(x_BxD)
  logits_BxC = nnx.merge(graphs.head, params["head"])(features_BxD)
  seen_C = jnp.arange(logits_BxC.shape[-1]) < num_seen
  return jnp.where(seen_C[None], logits_BxC, MASKED_LOGIT)


def _example_losses(graphs, params, x_BxD, labels_B, num_seen):
  """:math:`-\\log p(y \\mid x)` per example over the seen classes."""
  # The label's logit is read by a gather, which needs whole class rows:
  # logits sharded along an Explicit axis (like the head) are gathered.
  logits_BxC = tree.gather_explicit(logits(graphs, params, x_BxD, num_seen))[0]
  return optax.softmax_cross_entropy_with_integer_labels(logits_BxC, labels_B)


def train_task(graphs: Graphs, params: Params, x_NxD: jax.Array,
               labels_N: jax.Array, weights_N: jax.Array, key: jax.Array, *,
               num_seen: jax.Array | int, num_frozen: jax.Array | int,
               training: TaskTraining = TaskTraining()) -> Params:
  """Adapter and head after ``training.epochs`` epochs of SGD on one task.

  ``optax.chain(add_decayed_weights, sgd(cosine decay, momentum))``, a fresh
  optimiser state per task. Each epoch visits a random permutation of the
  ``N`` rows in batches (``N`` must be a multiple of the batch size: pad
  with rows of weight 0); the batch loss is the weighted mean cross-entropy
  (0 for a batch of padding rows only).
  The head rows of classes ``< num_frozen`` get no update.

  Raises ``ValueError`` for rows, labels and weights of other lengths,
  concrete ``num_seen`` outside [1, C] or ``num_frozen`` outside
  [0, num_seen], concrete weights that are negative or not finite, and
  (with concrete weights) concrete labels of weighted rows outside
  ``[0, num_seen)``. Unchecked (traced) values are used as given: a label
  at or above ``num_seen`` has a masked logit, so its loss is about
  ``-MASKED_LOGIT`` (1e9, a flag in any loss it enters) and its gradient
  only lowers the seen classes' logits; a negative label indexes from the
  end (``jnp`` indexing); a NaN weight makes the parameters NaN.
  """
  _check_class_count(params, "num_seen", num_seen, 1)
  _check_task(x_NxD, labels_N, weights_N, params, num_seen)
  _check_class_count(params, "num_frozen", num_frozen, 0)
  if not isinstance(num_frozen, jax.core.Tracer) and not isinstance(
      num_seen, jax.core.Tracer) and int(num_frozen) > int(num_seen):
    raise ValueError(f"num_frozen {int(num_frozen)} must be <= num_seen"
                     f" {int(num_seen)}: only seen classes can be frozen.")
  return _train_task(graphs, params, x_NxD, labels_N, weights_N, key,
                     num_seen=num_seen, num_frozen=num_frozen,
                     training=training)


@functools.partial(jax.jit, static_argnames=("graphs", "training"))
def _train_task(graphs: Graphs, params: Params, x_NxD: jax.Array,
                labels_N: jax.Array, weights_N: jax.Array, key: jax.Array, *,
                num_seen: jax.Array | int, num_frozen: jax.Array | int,
                training: TaskTraining = TaskTraining()) -> Params:
  """:func:`train_task` after its checks, compiled."""
  num_examples = x_NxD.shape[0]
  if num_examples % training.batch_size:
    raise ValueError(
        f"x_NxD has {num_examples} rows, not a multiple of batch_size"
        f" {training.batch_size}: pad with rows of weight 0.")
  # Every batch draws rows from the whole task: rows sharded along an
  # Explicit axis are gathered, as a gather at shuffled indices needs.
  x_NxD, labels_N, weights_N = tree.gather_explicit(
      (x_NxD, labels_N, weights_N))[0]
  steps_per_epoch = num_examples // training.batch_size
  num_steps = training.epochs * steps_per_epoch
  cosine = optax.cosine_decay_schedule(training.learning_rate, num_steps)
  optimizer = optax.chain(
      optax.add_decayed_weights(training.weight_decay),
      # optax's schedule mixes its int32 count with floats; cast it first so
      # that the step also runs under strict dtype promotion.
      optax.sgd(lambda count: cosine(count.astype(jnp.float32)),
                momentum=training.momentum))
  num_classes = params["head"]["prototypes_CxD"].shape[0]
  trainable_Cx1 = (jnp.arange(num_classes) >= num_frozen)[:, None]
  batches_SxB = jax.vmap(
      lambda k: jax.random.permutation(k, num_examples))(
          jax.random.split(key, training.epochs)).reshape(
              num_steps, training.batch_size)

  def batch_loss(params, idx_B):
    losses_B = _example_losses(graphs, params, x_NxD[idx_B], labels_N[idx_B],
                               num_seen)
    w_B = weights_N[idx_B]
    # The weighted mean at any weight scale; 0 for a batch of padding only.
    total = jnp.sum(w_B)
    return jnp.sum(w_B * losses_B) / jnp.where(total == 0, 1.0, total)

  def step(carry, idx_B):
    params, opt_state = carry
    grads = jax.grad(batch_loss)(params, idx_B)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    head_CxD = updates["head"]["prototypes_CxD"]
    updates["head"]["prototypes_CxD"] = jnp.where(trainable_Cx1, head_CxD, 0)
    return (optax.apply_updates(params, updates), opt_state), None

  (params, _), _ = jax.lax.scan(step, (params, optimizer.init(params)),
                                batches_SxB)
  return params


def adapter_fisher(graphs: Graphs, params: Params, x_NxD: jax.Array,
                   labels_N: jax.Array, weights_N: jax.Array,
                   num_seen: jax.Array | int) -> Any:
  """Diagonal empirical Fisher of the adapter on the rows of weight 1.

  Rows of weight 0 (padding) are left out: their per-example gradients are
  zeroed and the mean is taken over the weighted rows. Raises like
  :func:`train_task` (concrete weights must be 0 or 1: a weight scales the
  squared gradient, not the gradient). Compiled (``jax.jit``, ``graphs``
  static) after the checks.
  """
  _check_class_count(params, "num_seen", num_seen, 1)
  _check_task(x_NxD, labels_N, weights_N, params, num_seen,
              binary_weights=True)
  return _adapter_fisher(graphs, params, x_NxD, labels_N, weights_N, num_seen)


@functools.partial(jax.jit, static_argnames=("graphs",))
def _adapter_fisher(graphs, params, x_NxD, labels_N, weights_N, num_seen):
  """:func:`adapter_fisher` after its checks, compiled."""
  def example_loss(adapter, example):
    x_D, label, weight = example
    loss = _example_losses(graphs, {"adapter": adapter, "head": params["head"]},
                           x_D[None], label[None], num_seen)[0]
    return weight * loss  # weight in {0, 1}: squared gradient times weight

  fisher = diagonal_fisher(example_loss, params["adapter"],
                           (x_NxD, labels_N, weights_N))
  total = jnp.sum(weights_N)
  rescale = x_NxD.shape[0] / jnp.where(total == 0, 1.0, total)
  return jax.tree.map(lambda f: f * rescale, fisher)


def predict(graphs: Graphs, params: Params, x_BxD: jax.Array,
            num_seen: jax.Array | int) -> jax.Array:
  """The predicted class among the ``num_seen`` seen classes.

  Raises like :func:`logits`; compiled (``graphs`` static) after the check.
  """
  _check_class_count(params, "num_seen", num_seen, 1)
  return _predict(graphs, params, x_BxD, num_seen)


@functools.partial(jax.jit, static_argnames=("graphs",))
def _predict(graphs, params, x_BxD, num_seen):
  return jnp.argmax(logits(graphs, params, x_BxD, num_seen), axis=-1)


def class_incremental_metrics(task_accuracy: np.ndarray,
                              seen_accuracy: np.ndarray) -> dict[str, Any]:
  """Average incremental accuracy, final accuracy and average forgetting.

  Args:
    task_accuracy: ``R[i][j]``, accuracy on task ``j``'s classes after task
      ``i`` (``j <= i``; entries above the diagonal are ignored).
    seen_accuracy: ``A[i]``, accuracy on every class seen after task ``i``.

  Returns:
    ``average_incremental_accuracy`` (mean of ``A``), ``final_accuracy``
    (``A[-1]``), ``forgetting`` (mean over ``j < T-1`` of
    ``max_{j<=i<T-1} R[i][j] - R[T-1][j]``; 0 for one task) and the curve.

  Example:
    >>> import numpy as np
    >>> r = np.array([[1.0, np.nan], [0.5, 0.9]])
    >>> m = class_incremental_metrics(r, np.array([1.0, 0.7]))
    >>> m["average_incremental_accuracy"], m["final_accuracy"], m["forgetting"]
    (0.85, 0.7, 0.5)
  """
  r = np.asarray(task_accuracy, np.float64)
  a = np.asarray(seen_accuracy, np.float64)
  num_tasks = r.shape[0] if r.ndim else 0
  if (num_tasks < 1 or r.shape != (num_tasks, num_tasks)
      or a.shape != (num_tasks,)):
    raise ValueError(f"task_accuracy must be (T, T) and seen_accuracy (T,),"
                     f" T >= 1; got {r.shape} and {a.shape}.")
  lower = r[np.tril_indices(num_tasks)]
  for name, values in (("task_accuracy (on and below the diagonal)", lower),
                       ("seen_accuracy", a)):
    if not np.all((values >= 0) & (values <= 1)):
      raise ValueError(f"{name} must be accuracies in [0, 1]; got"
                       f" {values.tolist()}.")
  drops = [np.max(r[j:num_tasks - 1, j]) - r[-1, j]
           for j in range(num_tasks - 1)]
  return {"average_incremental_accuracy": float(np.mean(a)),
          "final_accuracy": float(a[-1]),
          "forgetting": float(np.mean(drops)) if drops else 0.0,
          "accuracy_curve": a.tolist()}
