"""Axis-aligned boxes: the IoU matrix and proposal recall at an IoU threshold.

Boxes are ``(x0, y0, x1, y1)`` in pixels, finite, ``x1 >= x0`` and
``y1 >= y0``. Sets of boxes have static shapes; a boolean mask marks the real
ones, so a batch of images with different object counts stacks into one array.

A box that breaks those rules (swapped corners, NaN or inf) is refused with a
``ValueError`` when the boxes are concrete. When they are traced it cannot be
refused: its IoU with every box is NaN (swapped corners would otherwise give a
box an IoU of 0 with itself), it neither covers nor is covered, and
:func:`box_recall` is NaN if it is a real (masked-in) box.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import tree


def _check_boxes(boxes: jax.Array, name: str) -> None:
  if boxes.ndim != 2 or boxes.shape[-1] != 4:
    raise ValueError(f"{name} must have shape (num_boxes, 4) as (x0, y0, x1,"
                     f" y1); got shape {boxes.shape}.")
  if not jnp.issubdtype(boxes.dtype, jnp.floating):
    raise TypeError(f"{name} must be floating point; got dtype {boxes.dtype}.")


def _defective(boxes: jax.Array) -> jax.Array:
  """Per box (any leading shape): non-finite, or a corner past its opposite."""
  return (~jnp.all(jnp.isfinite(boxes), axis=-1)
          | (boxes[..., 2] < boxes[..., 0]) | (boxes[..., 3] < boxes[..., 1]))


def _check_box_values(boxes: jax.Array, name: str,
                      valid: jax.Array | None = None) -> None:
  """Raises for a concrete real box that is non-finite or has swapped corners."""
  if isinstance(boxes, jax.core.Tracer) or isinstance(valid, jax.core.Tracer):
    return
  values = np.asarray(boxes)
  real = np.ones(values.shape[0], bool) if valid is None else np.asarray(valid)
  finite = np.isfinite(values).all(axis=-1)
  if not finite[real].all():
    row = int(np.flatnonzero(real & ~finite)[0])
    raise ValueError(f"{name} must hold finite coordinates; box {row} is"
                     f" {values[row].tolist()}.")
  swapped = (values[:, 2] < values[:, 0]) | (values[:, 3] < values[:, 1])
  if swapped[real].any():
    row = int(np.flatnonzero(real & swapped)[0])
    raise ValueError(f"{name} must be (x0, y0, x1, y1) with x1 >= x0 and"
                     f" y1 >= y0; box {row} is {values[row].tolist()} (swapped"
                     " corners?).")


def _check_mask(mask: jax.Array | None, boxes: jax.Array, name: str
                ) -> jax.Array:
  if mask is None:
    return jnp.ones(boxes.shape[:1], jnp.bool_)
  if mask.shape != boxes.shape[:1] or mask.dtype != jnp.bool_:
    raise ValueError(f"{name} must be a bool array of shape {boxes.shape[:1]};"
                     f" got {mask.dtype} of shape {mask.shape}.")
  return mask


def _mesh_axes(entry: str | tuple[str, ...] | None) -> set[str]:
  """The mesh axes of one PartitionSpec entry."""
  if entry is None:
    return set()
  return set(entry) if isinstance(entry, tuple) else {entry}


def box_iou(boxes_a_Nx4: jax.Array, boxes_b_Mx4: jax.Array) -> jax.Array:
  r"""Intersection over union of every pair of boxes.

  .. math::
    \mathrm{IoU}(a, b) = \frac{|a \cap b|}{|a| + |b| - |a \cap b|}

  with 0 where the union is empty (two degenerate boxes), and NaN where
  either box is non-finite or has swapped corners (possible only traced:
  concrete ones are refused; module docstring).

  Args:
    boxes_a_Nx4: ``(N, 4)`` boxes ``(x0, y0, x1, y1)``.
    boxes_b_Mx4: ``(M, 4)`` boxes, same dtype.

  Returns:
    ``(N, M)`` IoU matrix, entries in [0, 1].

  Raises:
    ValueError / TypeError: for arrays that are not ``(num_boxes, 4)``
      floating point of one dtype, or concrete boxes with a non-finite
      coordinate or swapped corners.

  Example:
    >>> import jax.numpy as jnp
    >>> a = jnp.array([[0.0, 0.0, 2.0, 2.0]])
    >>> b = jnp.array([[1.0, 0.0, 3.0, 2.0], [5.0, 5.0, 6.0, 6.0]])
    >>> [round(v, 4) for v in box_iou(a, b)[0].tolist()]
    [0.3333, 0.0]
  """
  _check_pair(boxes_a_Nx4, boxes_b_Mx4, "boxes_a_Nx4", "boxes_b_Mx4")
  _check_box_values(boxes_a_Nx4, "boxes_a_Nx4")
  _check_box_values(boxes_b_Mx4, "boxes_b_Mx4")
  return _iou(boxes_a_Nx4, boxes_b_Mx4)[0]


def _check_pair(boxes_a: jax.Array, boxes_b: jax.Array, name_a: str,
                name_b: str) -> None:
  _check_boxes(boxes_a, name_a)
  _check_boxes(boxes_b, name_b)
  if boxes_a.dtype != boxes_b.dtype:
    raise TypeError(f"{name_a} and {name_b} must have the same dtype; got"
                    f" {boxes_a.dtype} and {boxes_b.dtype}.")


def _iou(boxes_a_Nx4: jax.Array, boxes_b_Mx4: jax.Array
         ) -> tuple[jax.Array, jax.Array, jax.Array]:
  """:func:`box_iou` without the checks, and each set's ``_defective`` boxes.

  The defects are taken from the boxes as resharded for the matrix, so the
  (N,) one is laid out like its rows and the (M,) one like its columns.
  """
  spec_a = tree.explicit_spec(boxes_a_Nx4)
  spec_b = tree.explicit_spec(boxes_b_Mx4)
  # Each coordinate is sliced out of its box: Explicit axes slice only a
  # coordinate axis that is not sharded, so it is gathered.
  if spec_a is not None and spec_a[1] is not None:
    spec_a = jax.P(spec_a[0], None)
    boxes_a_Nx4 = jax.sharding.reshard(boxes_a_Nx4, spec_a)
  if spec_b is not None and spec_b[1] is not None:
    spec_b = jax.P(spec_b[0], None)
    boxes_b_Mx4 = jax.sharding.reshard(boxes_b_Mx4, spec_b)
  if (spec_a is not None and spec_b is not None
      and _mesh_axes(spec_a[0]) & _mesh_axes(spec_b[0])):
    # Explicit axes cannot shard both axes of the (N, M) matrix along one
    # mesh axis: b's boxes are gathered.
    boxes_b_Mx4 = jax.sharding.reshard(boxes_b_Mx4, jax.P(None, spec_b[1]))
  a, b = boxes_a_Nx4[:, None, :], boxes_b_Mx4[None, :, :]
  width = jnp.clip(jnp.minimum(a[..., 2], b[..., 2])
                   - jnp.maximum(a[..., 0], b[..., 0]), 0)
  height = jnp.clip(jnp.minimum(a[..., 3], b[..., 3])
                    - jnp.maximum(a[..., 1], b[..., 1]), 0)
  intersection_NxM = width * height
  area = lambda box: (box[..., 2] - box[..., 0]) * (box[..., 3] - box[..., 1])
  union_NxM = area(a) + area(b) - intersection_NxM
  iou_NxM = jnp.where(union_NxM > 0,
                      intersection_NxM / jnp.where(union_NxM > 0, union_NxM, 1),
                      0)
  defective_a, defective_b = _defective(a), _defective(b)
  return (jnp.where(defective_a | defective_b, jnp.nan, iou_NxM),
          defective_a[:, 0], defective_b[0])


def _check_threshold(iou_threshold: float) -> None:
  if isinstance(iou_threshold, jax.core.Tracer):
    raise TypeError("iou_threshold must be a concrete number (a Python float);"
                    " got a traced value.")
  if not 0.0 < iou_threshold <= 1.0:
    raise ValueError(f"iou_threshold must be in (0, 1]; got {iou_threshold}.")


def _coverage(truth_Gx4: jax.Array, proposals_Px4: jax.Array,
              truth_valid_G: jax.Array | None,
              proposals_valid_P: jax.Array | None, iou_threshold: float
              ) -> tuple[jax.Array, jax.Array, jax.Array]:
  """Checked inputs; ``(covered_G, truth_valid_G, flawed)``.

  ``flawed``: a real box of either set is non-finite or has swapped corners
  (traced only; concrete ones raise here).
  """
  _check_threshold(iou_threshold)
  _check_pair(truth_Gx4, proposals_Px4, "truth_Gx4", "proposals_Px4")
  truth_valid_G = _check_mask(truth_valid_G, truth_Gx4, "truth_valid_G")
  proposals_valid_P = _check_mask(proposals_valid_P, proposals_Px4,
                                  "proposals_valid_P")
  # Only the real boxes are checked: padding may hold anything.
  _check_box_values(truth_Gx4, "truth_Gx4", truth_valid_G)
  _check_box_values(proposals_Px4, "proposals_Px4", proposals_valid_P)
  iou_GxP, defective_G, defective_P = _iou(truth_Gx4, proposals_Px4)
  iou_spec = tree.explicit_spec(iou_GxP)
  if iou_spec is not None:
    # The mask meets the IoU matrix's columns, which box_iou may gather.
    proposals_valid_P = jax.sharding.reshard(proposals_valid_P,
                                             jax.P(iou_spec[1]))
  hit_GxP = (iou_GxP >= iou_threshold) & proposals_valid_P[None, :]
  flawed = (jnp.any(defective_G & truth_valid_G)
            | jnp.any(defective_P & proposals_valid_P))
  return jnp.any(hit_GxP, axis=1) & truth_valid_G, truth_valid_G, flawed


def covered_ground_truth(truth_Gx4: jax.Array, proposals_Px4: jax.Array, *,
                         truth_valid_G: jax.Array | None = None,
                         proposals_valid_P: jax.Array | None = None,
                         iou_threshold: float = 0.5) -> jax.Array:
  """Which true boxes have at least one valid proposal at IoU >= ``iou_threshold``.

  Proposal recall, as for region-proposal evaluation: no one-to-one matching,
  a proposal may cover several objects.

  Args:
    truth_Gx4: ``(G, 4)`` true boxes.
    proposals_Px4: ``(P, 4)`` proposals (e.g. the selected queries), same
      dtype.
    truth_valid_G: bool mask of the real true boxes (default: all).
    proposals_valid_P: bool mask of the proposals that count (default: all).
    iou_threshold: a Python float in (0, 1].

  Returns:
    ``(G,)`` bool, False for padding. A traced real box that is non-finite
    or has swapped corners neither covers nor is covered (:func:`box_recall`
    is NaN then).

  Raises:
    ValueError / TypeError: as :func:`box_iou` (the value check applies to
      the real boxes only), for a mask that is not bool of its set's length,
      or an ``iou_threshold`` outside (0, 1].

  Example:
    >>> import jax.numpy as jnp
    >>> truth = jnp.array([[0.0, 0.0, 2.0, 2.0], [4.0, 4.0, 6.0, 6.0]])
    >>> props = jnp.array([[0.0, 0.0, 2.0, 1.8], [4.0, 4.0, 5.0, 5.0]])
    >>> covered_ground_truth(truth, props).tolist()
    [True, False]
  """
  return _coverage(truth_Gx4, proposals_Px4, truth_valid_G, proposals_valid_P,
                   iou_threshold)[0]


def box_recall(truth_Gx4: jax.Array, proposals_Px4: jax.Array, *,
               truth_valid_G: jax.Array | None = None,
               proposals_valid_P: jax.Array | None = None,
               iou_threshold: float = 0.5) -> jax.Array:
  """Fraction of the real true boxes covered at IoU >= ``iou_threshold``.

  See :func:`covered_ground_truth` for the arguments and errors; an image
  without true boxes has recall 1 (nothing was missed). NaN if a real box
  of either set is non-finite or has swapped corners (possible only traced),
  not a recall that silently leaves it out.

  Example:
    >>> import jax.numpy as jnp
    >>> truth = jnp.array([[0.0, 0.0, 2.0, 2.0], [4.0, 4.0, 6.0, 6.0]])
    >>> props = jnp.array([[0.0, 0.0, 2.0, 1.8], [4.0, 4.0, 5.0, 5.0]])
    >>> float(box_recall(truth, props))
    0.5
  """
  covered_G, truth_valid_G, flawed = _coverage(
      truth_Gx4, proposals_Px4, truth_valid_G, proposals_valid_P,
      iou_threshold)
  num_truth = jnp.sum(truth_valid_G)
  recall = jnp.where(num_truth > 0,
                     jnp.sum(covered_G) / jnp.maximum(num_truth, 1), 1.0)
  return jnp.where(flawed, jnp.nan, recall)
