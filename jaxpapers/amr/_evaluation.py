r"""Free rollouts of trained models, scored against the truth step by step.

:func:`model_rollout` runs the rollout of :mod:`jaxpapers.amr._rollout` that
fits a residual model (:func:`jaxpapers.amr.residual_step`).

The error is VRMSE, the RMSE over the pixels divided by the standard deviation
of the true field (the normalised error of The Well, Ohana et al., NeurIPS
2024 Datasets and Benchmarks, https://arxiv.org/abs/2412.00568, without its
epsilon), on the whole field and on a region of interest (ROI): the pixels
under finest leaves of the mesh built from the true field at each step
(:func:`region_of_interest`; our definition of the WAMRViT abstract's
"region of interest", see ``docs/wamrvit.md``).

:func:`evaluate_rollout` consumes a rollout of :mod:`jaxpapers.amr._rollout`
through a :class:`StageTimer` and returns one record per step (errors,
tokens, throughput, wall time); :func:`summarize_rollout` reduces the records
to the scalars a report quotes. The scoring runs on the host in NumPy
(float64 where NumPy promotes), after the jitted rollout stages.
"""

import collections
import functools
import time
from typing import Any, Callable, Iterator, Sequence

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.amr._native import NativeWAMRViT
from jaxpapers.amr._rollout import build_meshes
from jaxpapers.amr._rollout import finest_pixels
from jaxpapers.amr._rollout import MeshConfig
from jaxpapers.amr._rollout import native_rollout
from jaxpapers.amr._rollout import quadtree_rollout
from jaxpapers.amr._rollout import RolloutStep
from jaxpapers.amr._rollout import StageCall
from jaxpapers.amr._rollout import uniform_rollout
from jaxpapers.amr._training import residual_step
from jaxpapers.amr._vit import WAMRViT


@functools.partial(jax.jit, static_argnames="graphdef")
def _model_step(params, state, trees=None, *, graphdef):
  return residual_step(nnx.merge(graphdef, params), state, trees)


def model_rollout(model: Any, fields_BxHxWxC: jax.Array, num_steps: int,
                  mesh: MeshConfig | None = None, *, frozen: bool = False,
                  call: StageCall | None = None) -> Iterator[RolloutStep]:
  """Free rollout of a residual model (:func:`jaxpapers.amr.residual_step`).

  Dispatches on the model: a :class:`jaxpapers.amr.WAMRViT` to
  :func:`quadtree_rollout` (``frozen`` allowed), a
  :class:`jaxpapers.amr.NativeWAMRViT` to :func:`native_rollout`, a
  :class:`jaxpapers.amr.UniformViT` to :func:`uniform_rollout` (``mesh``
  unused). The step is one jitted call per bucket, shared by every rollout
  of models with the same structure.

  Raises:
    ValueError: ``frozen`` for a model other than WAMRViT; the errors of the
      rollout it dispatches to.
  """
  graphdef, params = nnx.split(model)
  advance = functools.partial(_model_step, params, graphdef=graphdef)
  if frozen and not isinstance(model, WAMRViT):
    raise ValueError(
        f"frozen meshes need a WAMRViT; got {type(model).__name__}.")
  if isinstance(model, WAMRViT):
    return quadtree_rollout(advance, fields_BxHxWxC, num_steps, mesh,
                            frozen=frozen, call=call)
  if isinstance(model, NativeWAMRViT):
    return native_rollout(advance, fields_BxHxWxC, num_steps, mesh, call=call)
  return uniform_rollout(advance, fields_BxHxWxC, num_steps, model.patch,
                         call=call)


def vrmse(pred_BxHxWx1: np.ndarray, true_BxHxWx1: np.ndarray,
          mask_BxHxW: np.ndarray | None = None) -> np.ndarray:
  """Per-sample RMSE / std(true), over all pixels or over ``mask_BxHxW``.

  The standard deviation is always the whole true field's; an empty mask
  gives 0 (its mean counts at least one pixel). A constant true field has
  standard deviation 0: its VRMSE is ``inf`` (``NaN`` for an exact
  prediction).

  Raises:
    ValueError: the fields are not one shape ``(B, H, W, 1)``, or the mask is
      not ``(B, H, W)``.

  Example:
    >>> import numpy as np
    >>> from jaxpapers import amr
    >>> true = np.array([-1.0, 1.0, -1.0, 1.0]).reshape(1, 2, 2, 1)  # std 1
    >>> amr.vrmse(true + 0.5, true).tolist()
    [0.5]
  """
  if np.shape(pred_BxHxWx1) != np.shape(true_BxHxWx1) or (
      np.ndim(true_BxHxWx1) != 4 or np.shape(true_BxHxWx1)[-1] != 1):
    raise ValueError(
        "pred_BxHxWx1 and true_BxHxWx1 must both be (B, H, W, 1); got"
        f" {np.shape(pred_BxHxWx1)} and {np.shape(true_BxHxWx1)}.")
  if mask_BxHxW is not None and np.shape(mask_BxHxW) != np.shape(
      true_BxHxWx1)[:3]:
    raise ValueError(
        f"mask_BxHxW must be {np.shape(true_BxHxWx1)[:3]}; got"
        f" {np.shape(mask_BxHxW)}.")
  err2 = (pred_BxHxWx1 - true_BxHxWx1)[..., 0] ** 2
  std = np.std(true_BxHxWx1[..., 0], axis=(1, 2))
  if mask_BxHxW is None:
    return np.sqrt(err2.mean(axis=(1, 2))) / std
  return np.sqrt((err2 * mask_BxHxW).sum(axis=(1, 2))
                 / np.maximum(mask_BxHxW.sum(axis=(1, 2)), 1)) / std


def region_of_interest(truth_BxKxHxWxC: np.ndarray, mesh: MeshConfig
                       ) -> np.ndarray:
  """Bool ``(B, K, H, W)``: the pixels under finest leaves of each frame's mesh.

  Args:
    truth_BxKxHxWxC: true trajectories, ``K`` frames each.
    mesh: the mesh settings (:func:`jaxpapers.amr.build_meshes`).
  """
  return np.stack([
      np.asarray(jax.vmap(finest_pixels)(build_meshes(
          jnp.asarray(truth_BxKxHxWxC[:, k]), mesh)))
      for k in range(truth_BxKxHxWxC.shape[1])], axis=1)


class StageTimer:
  """A rollout's ``call`` hook: seconds per stage, compiling outside the timing.

  The first call of a stage with new argument shapes (a new token bucket)
  runs once untimed, so compilation never counts; ``seconds[stage]`` sums
  the timed calls.
  """

  def __init__(self):
    self.compiled, self.seconds = set(), collections.defaultdict(float)

  def __call__(self, stage: str, fn: Callable[..., Any], *args: Any) -> Any:
    key = (stage, tuple(np.shape(x) for x in jax.tree.leaves(args)))
    if key not in self.compiled:  # first call per stage and shapes: compile
      jax.block_until_ready(fn(*args))
      self.compiled.add(key)
    start = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    self.seconds[stage] += time.perf_counter() - start
    return out


def evaluate_rollout(rollout: Callable[..., Iterator[RolloutStep]],
                     truth_BxKxHxWx1: np.ndarray, roi_BxKxHxW: np.ndarray
                     ) -> tuple[list[dict[str, Any]], list[RolloutStep]]:
  """Per-step records of a rollout, means over its ``B`` trajectories.

  Args:
    rollout: ``rollout(call=...)`` returns the rollout's steps (e.g. a
      ``functools.partial`` of :func:`jaxpapers.amr.model_rollout`); it is
      run through a fresh :class:`StageTimer`.
    truth_BxKxHxWx1: the true frames; frame 0 is the rollout's start, frame
      ``k`` is compared with step ``k``.
    roi_BxKxHxW: the region of interest of each frame
      (:func:`region_of_interest`).

  Raises:
    ValueError: ``roi_BxKxHxW`` is not ``truth_BxKxHxWx1`` without its
      channel axis.

  Returns:
    The records (``step``, ``vrmse``, ``vrmse_roi``, ``tokens``: mean leaves
    read, ``tokens_per_s``: tokens over the model's seconds,
    ``ms_per_step``: model and regrid wall time, ``finite``), and the steps
    with NumPy fields.
  """
  if np.shape(roi_BxKxHxW) != np.shape(truth_BxKxHxWx1)[:4]:
    raise ValueError(
        f"roi_BxKxHxW must be {np.shape(truth_BxKxHxWx1)[:4]} (the truth"
        f" without channels); got {np.shape(roi_BxKxHxW)}.")
  timer = StageTimer()
  records, steps = [], []
  for k, step in enumerate(rollout(call=timer), start=1):
    field, tokens = np.asarray(step.fields), np.asarray(step.num_tokens)
    model_seconds = timer.seconds.pop("model")
    records.append({
        "step": k,
        "vrmse": float(np.mean(vrmse(field, truth_BxKxHxWx1[:, k]))),
        "vrmse_roi": float(np.mean(vrmse(field, truth_BxKxHxWx1[:, k],
                                         roi_BxKxHxW[:, k]))),
        "tokens": float(np.mean(tokens)),
        "tokens_per_s": float(np.sum(tokens) / model_seconds),
        "ms_per_step": 1e3 * (model_seconds + timer.seconds.pop("regrid", 0.0)),
        "finite": bool(np.isfinite(field).all()),
    })
    steps.append(step._replace(fields=field))
  return records, steps


def summarize_rollout(records: Sequence[dict[str, Any]], short_steps: int,
                      valid_vrmse: float) -> dict[str, Any]:
  """Scalars of one rollout's records (:func:`evaluate_rollout`).

  For ``vrmse`` and ``vrmse_roi``: ``_step1``, ``_short`` (mean of the first
  ``short_steps``), ``_mean`` (all steps) and ``_last``; ``valid_steps``: the
  leading steps with global VRMSE below ``valid_vrmse`` (ours: how long the
  rollout stays on track); ``tokens_mean``, ``tokens_last``, the mean
  ``tokens_per_s`` and ``ms_per_step``, and ``finite`` (every step).

  Raises:
    ValueError: no records, ``short_steps`` not in ``[1, len(records)]``, or
      ``valid_vrmse`` not > 0 (NaN would count no step as valid).
  """
  if not valid_vrmse > 0:
    raise ValueError(f"valid_vrmse must be > 0; got {valid_vrmse}.")
  if not records:
    raise ValueError("records is empty: a rollout has at least one step.")
  if not isinstance(short_steps, int) or not 1 <= short_steps <= len(records):
    raise ValueError(
        f"short_steps must be an int in [1, {len(records)}]; got"
        f" {short_steps!r}.")
  def mean(key, steps=len(records)):
    return float(np.mean([r[key] for r in records[:steps]]))
  out = {}
  for key in ("vrmse", "vrmse_roi"):
    out[f"{key}_step1"] = records[0][key]
    out[f"{key}_short"] = mean(key, short_steps)
    out[f"{key}_mean"] = mean(key)
    out[f"{key}_last"] = records[-1][key]
  below = [r["vrmse"] < valid_vrmse for r in records] + [False]
  out["valid_steps"] = float(below.index(False))
  out.update(tokens_mean=mean("tokens"), tokens_last=records[-1]["tokens"],
             tokens_per_s=mean("tokens_per_s"), ms_per_step=mean("ms_per_step"),
             finite=all(r["finite"] for r in records))
  return out
