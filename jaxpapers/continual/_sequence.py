r"""A class-incremental task sequence learnt into one global adapter (DAF's loop).

:func:`class_order` draws an order of arrival of the classes and
:class:`TaskRows` splits training rows by it into tasks padded to whole
batches; :func:`learn_sequence` runs the protocol of adapter-fusion
class-incremental learning (TUNA, ICCV 2025,
https://github.com/Ngahoang2005/ICCV2025-TUNA;
DAF, Liu et al., 2026, https://arxiv.org/abs/2601.21341): per task, a task
adapter and the head are trained (:func:`~jaxpapers.continual.train_task`),
the task adapter is fused into the global adapter
(:func:`~jaxpapers.continual.update`, with the task's diagonal Fisher) or
replaces it, and the one global adapter is evaluated on every class seen;
:func:`sequence_metrics` summarises its records.
"""

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers._checks import check_int
from jaxpapers.continual import _fusion as fusion_lib
from jaxpapers.continual import _incremental as incremental

Rows = tuple[jax.Array, jax.Array, jax.Array]
# Where each task's adapter starts: the global adapter, the initialisation,
# or (with the head) a fresh model trained on every task so far.
STARTS = ("global", "initial", "joint")

_update = jax.jit(fusion_lib.update, static_argnums=3)


def _scalar_or_mean(coefficient: Any) -> float:
  """A global coefficient, or the mean of the per-layer ones."""
  return float(np.mean([np.asarray(c) for c in jax.tree.leaves(coefficient)]))


def class_order(seed: int, num_classes: int) -> np.ndarray:
  """``position[c]``: when class ``c`` arrives in random class order ``seed``.

  The order is ``numpy.random.default_rng(seed).permutation(num_classes)``;
  ``position[labels]`` renumbers labels in order of arrival.

  Raises:
    ValueError: ``num_classes`` not an int >= 1 (TypeError: not an int).

  Example:
    >>> class_order(0, 4)[np.random.default_rng(0).permutation(4)].tolist()
    [0, 1, 2, 3]
  """
  check_int("num_classes", num_classes, 1)
  permutation = np.random.default_rng(seed).permutation(num_classes)
  return np.argsort(permutation).astype(np.int32)


class TaskRows:
  """Training rows split into tasks of ``classes_per_task`` classes, padded.

  Labels are numbered in order of arrival (e.g. ``class_order(k, C)[y]``):
  task ``t`` holds classes ``[t k, (t + 1) k)``. Every task is padded to
  ``task_size`` rows, ``k`` times the largest class rounded up to whole
  batches, so each task (and each span of tasks) has one static shape;
  padding rows repeat real ones with weight 0.

  Args:
    x_NxD: training features.
    labels_N: their int classes, in order of arrival, >= 0.
    classes_per_task: ``k``.
    batch_size: the training batch size.

  Raises:
    ValueError: features not 2-D, labels not one non-negative int per row,
      ``classes_per_task`` or ``batch_size`` not an int >= 1; when called,
      tasks ``first..last`` out of order or without a row.

  Example:
    >>> rows = TaskRows(np.eye(3), np.array([0, 1, 1]), classes_per_task=1,
    ...                 batch_size=2)
    >>> x, labels, weights = rows(1, 1)
    >>> rows.task_size, labels.tolist(), weights.tolist()
    (2, [1, 1], [1.0, 1.0])
  """

  def __init__(self, x_NxD: np.ndarray, labels_N: np.ndarray, *,
               classes_per_task: int, batch_size: int):
    self.x_NxD, self.labels_N = np.asarray(x_NxD), np.asarray(labels_N)
    if self.x_NxD.ndim != 2:
      raise ValueError(f"x_NxD must be (N, D) features; got {self.x_NxD.shape}.")
    if (self.labels_N.shape != self.x_NxD.shape[:1]
        or not np.issubdtype(self.labels_N.dtype, np.integer)
        or np.any(self.labels_N < 0)):
      raise ValueError(f"labels_N must be one int class >= 0 per row"
                       f" ({self.x_NxD.shape[0]},); got"
                       f" {self.labels_N.dtype}{list(self.labels_N.shape)}.")
    self.classes_per_task = check_int("classes_per_task", classes_per_task, 1)
    check_int("batch_size", batch_size, 1)
    largest = classes_per_task * int(np.max(np.bincount(self.labels_N)))
    self.task_size = -(-largest // batch_size) * batch_size

  def __call__(self, first: int, last: int) -> Rows:
    """Padded rows of tasks ``first..last``: x, labels, weights (0: padding)."""
    if not 0 <= first <= last:
      raise ValueError(f"need 0 <= first <= last; got {first} and {last}.")
    k = self.classes_per_task
    keep = np.flatnonzero((self.labels_N >= first * k)
                          & (self.labels_N < (last + 1) * k))
    if not keep.size:
      raise ValueError(f"tasks {first}..{last} hold no training row.")
    size = (last - first + 1) * self.task_size
    pad = np.resize(keep, size)  # padding rows repeat real ones, weight 0
    weights = (np.arange(size) < keep.size).astype(np.float32)
    return (jnp.asarray(self.x_NxD[pad]), jnp.asarray(self.labels_N[pad]),
            jnp.asarray(weights))


def learn_sequence(graphs: incremental.Graphs, initial: incremental.Params,
                   task_rows: Callable[[int, int], Rows], x_test_NxD: jax.Array,
                   labels_test_N: np.ndarray, task_keys: Sequence[jax.Array], *,
                   classes_per_task: int,
                   training: incremental.TaskTraining = (
                       incremental.TaskTraining()),
                   fusion: fusion_lib.FusionConfig | None = None,
                   start: str = "global") -> list[dict[str, Any]]:
  """Learns tasks ``0..T-1`` in turn; returns a record per task.

  Task ``t`` holds classes ``[t k, (t + 1) k)`` (``k = classes_per_task``).
  Its adapter starts from the global adapter (``start="global"``) or the
  initial one (``"initial"``), with the current head, and trains on
  ``task_rows(t, t)`` with the head rows of earlier classes frozen; with
  ``"joint"`` a fresh model (``initial``) trains on ``task_rows(0, t)``,
  nothing frozen. The task adapter is then fused into the global adapter by
  :func:`~jaxpapers.continual.update` (``fusion``; curvature: its
  :func:`~jaxpapers.continual.adapter_fisher`), or replaces it
  (``fusion=None``). The global adapter and the head predict the test rows
  among the classes seen.

  Args:
    graphs: the learner's structure (:func:`~jaxpapers.continual.init_learner`).
    initial: its initial ``{"adapter", "head"}`` parameters (the prior centre).
    task_rows: ``(first, last) -> (x_NxD, labels_N, weights_N)``, the training
      rows of tasks ``first..last``, padded to whole batches (weight 0).
    x_test_NxD: test features.
    labels_test_N: their classes, numbered in order of arrival.
    task_keys: one training key per task; their number is the task count T.
    classes_per_task: ``k``.
    training: the SGD of each task.
    fusion: how to fuse; None keeps the newest task adapter as the global one.
    start: one of :data:`STARTS`.

  Returns:
    Per task ``t``: ``{"step": t, "seen_accuracy": accuracy on every class
    seen, "task_accuracy": [accuracy on task j's classes for j <= t]}``, with
    a fusion also ``alpha``, ``beta`` (per-layer ones averaged), ``lam`` and
    ``num_clipped`` (:class:`~jaxpapers.continual.FusionInfo`).

  Raises:
    ValueError: an unknown ``start``, no task key, ``classes_per_task`` not an
      int >= 1, more classes than the head has, or test labels and features
      of other lengths; and as :func:`~jaxpapers.continual.train_task` for the
      rows.

  Example:
    >>> import jax, jax.numpy as jnp, numpy as np
    >>> from jaxpapers import continual
    >>> graphs, params = continual.init_learner(jax.random.key(0), 4, 2, 4)
    >>> x, y = jnp.eye(4), np.arange(4)
    >>> rows = lambda first, last: (x, jnp.asarray(y), jnp.asarray(
    ...     ((y >= 2 * first) & (y < 2 * last + 2)).astype(np.float32)))
    >>> records = continual.learn_sequence(
    ...     graphs, params, rows, x, y, jax.random.split(jax.random.key(1), 2),
    ...     classes_per_task=2, training=continual.TaskTraining(
    ...         epochs=1, batch_size=2), fusion=continual.FusionConfig())
    >>> [len(r["task_accuracy"]) for r in records], records[0]["alpha"]
    ([1, 2], 0.0)
  """
  if start not in STARTS:
    raise ValueError(f"start must be one of {STARTS}; got {start!r}.")
  num_tasks = len(task_keys)
  if not num_tasks:
    raise ValueError("task_keys is empty: one key per task, at least one.")
  check_int("classes_per_task", classes_per_task, 1)
  num_classes = initial["head"]["prototypes_CxD"].shape[0]
  if num_tasks * classes_per_task > num_classes:
    raise ValueError(f"{num_tasks} tasks x {classes_per_task} classes exceed"
                     f" the head's {num_classes} classes.")
  labels_test_N = np.asarray(labels_test_N)
  if labels_test_N.shape != (np.shape(x_test_NxD)[0],):
    raise ValueError(f"labels_test_N must be one class per test row"
                     f" ({np.shape(x_test_NxD)[0]},); got"
                     f" {labels_test_N.shape}.")
  state, head = fusion_lib.init(initial["adapter"]), initial["head"]
  records = []
  for t, key in enumerate(task_keys):
    num_seen = (t + 1) * classes_per_task
    if start == "joint":  # a fresh model on every class seen so far
      begin, first, frozen = initial, 0, 0
    else:
      adapter = (initial["adapter"] if start == "initial"
                 else state.global_params)
      begin, first, frozen = ({"adapter": adapter, "head": head}, t,
                              t * classes_per_task)
    x, labels, weights = task_rows(first, t)
    trained = incremental.train_task(graphs, begin, x, labels, weights, key,
                                     num_seen=num_seen, num_frozen=frozen,
                                     training=training)
    head, record = trained["head"], {"step": t}
    if fusion is None:
      state = state._replace(global_params=trained["adapter"])
    else:
      fisher = incremental.adapter_fisher(graphs, trained, x, labels, weights,
                                          num_seen)
      state, info = _update(state, trained["adapter"], fisher, fusion)
      record.update(alpha=_scalar_or_mean(info.alpha),
                    beta=_scalar_or_mean(info.beta), lam=float(info.lam),
                    num_clipped=int(info.num_clipped))
    correct = np.asarray(incremental.predict(
        graphs, {"adapter": state.global_params, "head": head}, x_test_NxD,
        num_seen)) == labels_test_N
    record["seen_accuracy"] = float(np.mean(correct[labels_test_N < num_seen]))
    record["task_accuracy"] = [
        float(np.mean(correct[labels_test_N // classes_per_task == j]))
        for j in range(t + 1)]
    records.append(record)
  return records


def sequence_metrics(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
  """:func:`~jaxpapers.continual.class_incremental_metrics` of a run's records.

  Args:
    records: :func:`learn_sequence`'s records, one per task in order (each
      with ``seen_accuracy`` and ``task_accuracy``; ``alpha``, ``beta`` and
      ``num_clipped`` where fused).

  Returns:
    The metrics and ``accuracy_curve``; ``alpha`` and ``beta`` over tasks
    where the records have them; ``num_clipped`` summed (0 without fusion).

  Raises:
    ValueError: no record, or a record whose ``task_accuracy`` is not one
      accuracy per task so far (and as ``class_incremental_metrics``).

  Example:
    >>> m = sequence_metrics([{"seen_accuracy": 1.0, "task_accuracy": [1.0]},
    ...                       {"seen_accuracy": 0.7, "task_accuracy": [0.5, 0.9]}])
    >>> m["average_incremental_accuracy"], m["forgetting"], m["num_clipped"]
    (0.85, 0.5, 0)
  """
  if not records:
    raise ValueError("records is empty: a sequence has at least one task.")
  r = np.full((len(records), len(records)), np.nan)
  for i, record in enumerate(records):
    if len(record["task_accuracy"]) != i + 1:
      raise ValueError(f"records[{i}]['task_accuracy'] must hold {i + 1}"
                       f" accuracies (tasks 0..{i}); got"
                       f" {len(record['task_accuracy'])}.")
    r[i, : i + 1] = record["task_accuracy"]
  out = incremental.class_incremental_metrics(
      r, np.array([record["seen_accuracy"] for record in records]))
  out.update({k: [record[k] for record in records] for k in ("alpha", "beta")
              if k in records[0]})
  out["num_clipped"] = sum(record.get("num_clipped", 0) for record in records)
  return out
