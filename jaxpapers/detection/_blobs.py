r"""A toy tiny-object world: Gaussian blob images and a fixed LoG "encoder".

Our CPU-scale stand-in for a two-stage DETR's encoder (``docs/butr.md``),
so the budgeting view of BUTR can be tested without training a detector:

* **Images.** ``size x size`` images with :math:`N` objects, :math:`N`
  log-uniform in ``count_range`` (default [1, 400]); object :math:`i` is a
  blob :math:`\exp(-|x - c_i|^2 / 2\sigma_i^2)` with :math:`\sigma_i` uniform
  in ``sigma_range`` (default [0.7, 2] px), plus Gaussian pixel noise (s.d.
  0.05). Its true box is :math:`c_i \pm 2\sigma_i`.
* **Encoder.** The scale-normalised Laplacian of Gaussian
  :math:`-\sigma^2 \nabla^2 (G_\sigma * x)` at a few scales; one proposal
  per ``stride x stride`` token (32 x 32 = 1024 proposals at stride 4): the
  token's strongest response over its pixels and the scales, its position
  and its scale :math:`\hat\sigma` (each refined by a parabola through the
  neighbouring pixels or scales), and the box :math:`\hat c \pm 2\hat\sigma`.
  The confidence is :math:`s_j = \sigma(a\, r_j + b)` with :math:`a, b` fitted
  once by logistic regression (:func:`fit_calibration`).

Pixel ``(row, col)`` covers ``[col, col + 1) x [row, row + 1)``; boxes are
``(x0, y0, x1, y1)`` in those coordinates.
"""

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import tree
from jaxpapers._checks import check_int
from jaxpapers._checks import is_concrete
from jaxpapers.detection import _boxes as boxes_lib

DEFAULT_SCALES = (0.75, 0.95, 1.2, 1.5, 1.9, 2.4)


class BlobImages(NamedTuple):
  """A batch of generated Gaussian-blob images and their true boxes (padded to G)."""

  images: jax.Array  # (B, H, W) float32
  boxes: jax.Array  # (B, G, 4) true boxes, G = count_range[1], padded
  valid: jax.Array  # (B, G) bool, the first counts[b] are real
  counts: jax.Array  # (B,) int32, objects per image


class Proposals(NamedTuple):
  """One proposal per encoder token: its LoG response and its (x0, y0, x1, y1) box."""

  response: jax.Array  # (..., N) strongest LoG response of each token
  boxes: jax.Array  # (..., N, 4) the token's proposal box


class Calibration(NamedTuple):
  """Confidence :math:`\\sigma(a r + b)` of a LoG response :math:`r`."""

  weight: jax.Array  # a, () float32
  bias: jax.Array  # b, () float32


def blob_images(key: jax.Array, num_images: int, *, size: int = 128,
                count_range: tuple[int, int] = (1, 400),
                sigma_range: tuple[float, float] = (0.7, 2.0),
                noise_std: float = 0.05) -> BlobImages:
  """``num_images`` blob images, a pure function of ``key`` (module docstring).

  Raises:
    ValueError / TypeError: unless ``num_images >= 0`` and ``size >= 1`` are
      ints, ``count_range`` ints with ``1 <= low <= high``, ``sigma_range``
      finite with ``0 < low <= high`` and ``noise_std`` finite and ``>= 0``
      (the last two checked when concrete; traced ones are used as given).

  Example:
    >>> import jax
    >>> data = blob_images(jax.random.key(0), 3, size=32, count_range=(1, 8))
    >>> data.images.shape, data.boxes.shape, bool((data.valid.sum(1) == data.counts).all())
    ((3, 32, 32), (3, 8, 4), True)
  """
  check_int("num_images", num_images, 0)
  check_int("size", size, 1)
  if len(count_range) != 2:
    raise ValueError(f"count_range must be (low, high); got {count_range}.")
  for bound in count_range:
    check_int("count_range entry", bound, 0)
  low, high = count_range
  if not 1 <= low <= high:
    raise ValueError(f"count_range must be 1 <= low <= high; got {count_range}.")
  if len(sigma_range) != 2:
    raise ValueError(f"sigma_range must be (low, high); got {sigma_range}.")
  if is_concrete(*sigma_range):
    sigma_low, sigma_high = (float(v) for v in sigma_range)
    if not (np.isfinite(sigma_high) and 0 < sigma_low <= sigma_high):
      raise ValueError(f"sigma_range must be finite with 0 < low <= high"
                       f" (blob widths in px); got {sigma_range}.")
  if is_concrete(noise_std) and not (np.isfinite(float(noise_std))
                                   and float(noise_std) >= 0):
    raise ValueError(f"noise_std must be finite and >= 0; got {noise_std}.")
  return _blob_images(key, num_images, size=size,
                      count_range=(int(low), int(high)),
                      sigma_range=sigma_range, noise_std=noise_std)


@functools.partial(jax.jit, static_argnames=("num_images", "size",
                                             "count_range"))
def _blob_images(key: jax.Array, num_images: int, *, size: int,
                 count_range: tuple[int, int],
                 sigma_range: tuple[float, float],
                 noise_std: float) -> BlobImages:
  low, high = count_range
  count_key, centre_key, sigma_key, noise_key = jax.random.split(key, 4)
  log_count = jax.random.uniform(count_key, (num_images,), minval=math.log(low),
                                 maxval=math.log(high + 1))
  counts_B = jnp.clip(jnp.floor(jnp.exp(log_count)), low, high).astype(jnp.int32)
  centres_BxGx2 = jax.random.uniform(centre_key, (num_images, high, 2),
                                     maxval=size)
  sigmas_BxG = jax.random.uniform(sigma_key, (num_images, high),
                                  minval=sigma_range[0], maxval=sigma_range[1])
  valid_BxG = jnp.arange(high)[None, :] < counts_B[:, None]
  pixel_P = jnp.arange(size, dtype=jnp.float32) + 0.5

  def profile(centre_G, sigma_G):  # (G, size): one Gaussian factor per blob
    return jnp.exp(-(pixel_P[None, :] - centre_G[:, None]) ** 2
                   / (2 * sigma_G[:, None] ** 2))

  gx_BxGxW = jax.vmap(profile)(centres_BxGx2[..., 0], sigmas_BxG)
  gy_BxGxH = jax.vmap(profile)(centres_BxGx2[..., 1], sigmas_BxG)
  gx_BxGxW = jnp.where(valid_BxG[..., None], gx_BxGxW, 0)
  images = jnp.einsum("bgh,bgw->bhw", gy_BxGxH, gx_BxGxW)
  images = images + noise_std * jax.random.normal(noise_key, images.shape)
  half = 2 * sigmas_BxG[..., None]
  boxes_BxGx4 = jnp.concatenate([centres_BxGx2 - half, centres_BxGx2 + half],
                                axis=-1)
  return BlobImages(images, boxes_BxGx4, valid_BxG, counts_B)


def _log_kernels(scales: tuple[float, ...]) -> jax.Array:
  """``(S, 1, k, k)`` scale-normalised negative LoG kernels, one size for all."""
  radius = math.ceil(3 * max(scales))
  offsets = np.arange(-radius, radius + 1, dtype=np.float64)
  kernels = []
  for sigma in scales:
    g = np.exp(-offsets ** 2 / (2 * sigma ** 2))
    g /= g.sum()
    g2 = g * (offsets ** 2 - sigma ** 2) / sigma ** 4  # d^2/dx^2 of g
    laplacian = np.outer(g2, g) + np.outer(g, g2)
    laplacian -= laplacian.mean()  # no response to a constant background
    kernels.append(-sigma ** 2 * laplacian)
  return jnp.asarray(np.stack(kernels)[:, None], jnp.float32)


def _parabola_offset(left: jax.Array, centre: jax.Array, right: jax.Array
                     ) -> jax.Array:
  """Vertex of the parabola through three equally spaced samples, in [-0.5, 0.5]."""
  curvature = left - 2 * centre + right
  safe = jnp.where(curvature < 0, curvature, -1)
  return jnp.where(curvature < 0,
                   jnp.clip(0.5 * (left - right) / safe, -0.5, 0.5), 0)


def _interpolated_scale(responses_BxSxHxW: jax.Array, row_BxN: jax.Array,
                        col_BxN: jax.Array, scales: tuple[float, ...]
                        ) -> jax.Array:
  """The scale of the strongest response at each pixel, refined between grid scales.

  A parabola in log-scale through the best scale and its neighbours; the
  grid ends are kept as they are.
  """
  at_BxSxN = jax.vmap(lambda r, i, j: r[:, i, j])(responses_BxSxHxW, row_BxN,
                                                   col_BxN)
  best_BxN = jnp.argmax(at_BxSxN, axis=1)
  last = len(scales) - 1
  inner_BxN = jnp.clip(best_BxN, 1, max(last - 1, 1))
  pick = lambda k: jnp.take_along_axis(at_BxSxN, k[:, None], axis=1)[:, 0]
  offset = _parabola_offset(pick(inner_BxN - 1), pick(inner_BxN),
                            pick(inner_BxN + 1))
  log_scales = jnp.log(jnp.asarray(scales, jnp.float32))
  step = (log_scales[-1] - log_scales[0]) / max(last, 1)
  interior = (best_BxN > 0) & (best_BxN < last)
  # A lookup at sharded indices: on Explicit axes it keeps their sharding.
  grid_BxN = log_scales.at[best_BxN].get(
      out_sharding=tree.explicit_spec(best_BxN))
  return jnp.exp(grid_BxN + jnp.where(interior, offset * step, 0))


def log_proposals(images_BxHxW: jax.Array, *, stride: int = 4,
                  scales: tuple[float, ...] = DEFAULT_SCALES) -> Proposals:
  """One proposal per ``stride x stride`` token: response and box (module docstring).

  Args:
    images_BxHxW: real images, ``H`` and ``W`` positive multiples of
      ``stride``.
    stride: token size in pixels, an int >= 1.
    scales: LoG scales (px), the candidate :math:`\\hat\\sigma`: finite,
      positive and increasing (the scale refinement steps in log-scale).

  Returns:
    :class:`Proposals` with ``N = (H / stride) * (W / stride)`` tokens in
    row-major order.

  Raises:
    ValueError / TypeError: for images that are not ``(B, H, W)`` real
      arrays with ``H`` and ``W`` positive multiples of ``stride``, or a
      ``stride`` or ``scales`` outside those ranges.

  Example:
    >>> import jax
    >>> data = blob_images(jax.random.key(0), 2, size=32, count_range=(1, 8))
    >>> log_proposals(data.images).boxes.shape
    (2, 64, 4)
  """
  if images_BxHxW.ndim != 3:
    raise ValueError(f"images_BxHxW must be (batch, height, width); got shape"
                     f" {images_BxHxW.shape}.")
  if not (jnp.issubdtype(images_BxHxW.dtype, jnp.floating)
          or jnp.issubdtype(images_BxHxW.dtype, jnp.integer)):
    raise TypeError(f"images_BxHxW must be real; got {images_BxHxW.dtype}.")
  check_int("stride", stride, 1)
  scales = tuple(scales)
  if (not scales or not all(np.isfinite(s) and s > 0 for s in scales)
      or any(a >= b for a, b in zip(scales, scales[1:]))):
    raise ValueError(f"scales must be finite, positive and increasing LoG"
                     f" scales (px); got {scales}.")
  _, h, w = images_BxHxW.shape
  if h % stride or w % stride or not h or not w:
    raise ValueError(f"image size {(h, w)} must be a positive multiple of"
                     f" stride {stride}.")
  return _log_proposals(images_BxHxW, stride=int(stride),
                        scales=tuple(float(s) for s in scales))


@functools.partial(jax.jit, static_argnames=("stride", "scales"))
def _log_proposals(images_BxHxW: jax.Array, *, stride: int,
                   scales: tuple[float, ...]) -> Proposals:
  _, h, w = images_BxHxW.shape
  spec = tree.explicit_spec(images_BxHxW)
  if spec is not None:
    # Explicit axes refuse the token reshapes of a sharded image axis: the
    # images keep only their batch sharding.
    images_BxHxW = jax.sharding.reshard(images_BxHxW,
                                        jax.P(spec[0], None, None))
  kernels = _log_kernels(scales)
  responses_BxSxHxW = jax.lax.conv_general_dilated(
      images_BxHxW[:, None].astype(jnp.float32), kernels, (1, 1), "SAME")
  best_BxHxW = jnp.max(responses_BxSxHxW, axis=1)
  th, tw = h // stride, w // stride
  # One axis per reshape, which Explicit axes accept (tree.split_axis).
  cells = tree.split_axis(tree.split_axis(best_BxHxW, 2, (tw, stride)), 1,
                          (th, stride)).transpose(0, 1, 3, 2, 4)
  cells = tree.merge_axes(tree.merge_axes(cells, 3), 1)
  response_BxN = jnp.max(cells, axis=-1)
  within = jnp.argmax(cells, axis=-1)
  token = jnp.arange(th * tw)[None, :]
  row = (token // tw) * stride + within // stride  # (B, N)
  col = (token % tw) * stride + within % stride
  # Per image: an edge pad would also slice the (sharded) batch axis.
  padded = jax.vmap(lambda best_HxW: jnp.pad(best_HxW, 1, mode="edge"))(
      best_BxHxW)
  at = lambda dr, dc: jax.vmap(lambda p, r, c: p[r + 1 + dr, c + 1 + dc])(
      padded, row, col)
  centre = at(0, 0)
  dx = _parabola_offset(at(0, -1), centre, at(0, 1))
  dy = _parabola_offset(at(-1, 0), centre, at(1, 0))
  x = col.astype(jnp.float32) + 0.5 + dx
  y = row.astype(jnp.float32) + 0.5 + dy
  sigma = _interpolated_scale(responses_BxSxHxW, row, col, scales)
  boxes_BxNx4 = jnp.stack([x - 2 * sigma, y - 2 * sigma, x + 2 * sigma,
                           y + 2 * sigma], axis=-1)
  return Proposals(response_BxN, boxes_BxNx4)


def proposal_labels(proposals: Proposals, data: BlobImages,
                    iou_threshold: float = 0.5) -> jax.Array:
  """``(B, N)`` bool: proposals that cover a true box at IoU >= ``iou_threshold``.

  The classification target of the encoder's confidence.

  Raises:
    ValueError / TypeError: for boxes that are not ``(B, N, 4)`` and
      ``(B, G, 4)`` of one batch and dtype, ``data.valid`` not ``(B, G)``
      bool, or (when concrete) a proposal or real true box that is
      non-finite or has swapped corners; traced, such a box covers nothing
      (:func:`jaxpapers.detection.covered_ground_truth`).
  """
  boxes, truth, valid = proposals.boxes, data.boxes, data.valid
  if (boxes.ndim != 3 or truth.ndim != 3 or truth.shape[0] != boxes.shape[0]
      or boxes.shape[-1] != 4 or truth.shape[-1] != 4):
    raise ValueError(f"proposals.boxes and data.boxes must be (B, N, 4) and"
                     f" (B, G, 4) of one batch; got {boxes.shape} and"
                     f" {truth.shape}.")
  if not jnp.issubdtype(boxes.dtype, jnp.floating) or boxes.dtype != truth.dtype:
    raise TypeError(f"proposals.boxes and data.boxes must be floating point of"
                    f" one dtype; got {boxes.dtype} and {truth.dtype}.")
  if valid.shape != truth.shape[:2] or valid.dtype != jnp.bool_:
    raise ValueError(f"data.valid must be a bool array of shape"
                     f" {truth.shape[:2]}; got {valid.dtype} of shape"
                     f" {valid.shape}.")
  if is_concrete(boxes, truth, valid):
    # One eager check of the whole batch (the mapped calls see tracers).
    boxes_lib._check_box_values(np.reshape(boxes, (-1, 4)), "proposals.boxes")
    boxes_lib._check_box_values(np.reshape(truth, (-1, 4)), "data.boxes",
                                np.reshape(valid, -1))

  def one(boxes_Nx4, truth_Gx4, valid_G):
    return boxes_lib.covered_ground_truth(
        boxes_Nx4, truth_Gx4, proposals_valid_P=valid_G,
        iou_threshold=iou_threshold)
  # Proposals and truth sharded unlike each other are mapped alike.
  return tree.vmap_sharded(one)(boxes, truth, valid)


def _separable(response_M: jax.Array, positive_M: jax.Array) -> jax.Array:
  """True where a threshold on the response splits the classes (ties count).

  Then the log loss has no minimiser: it falls towards 0 as the weight
  grows (one class only is the special case of an empty class).
  """
  low = lambda take: jnp.min(jnp.where(take, response_M, jnp.inf))
  high = lambda take: jnp.max(jnp.where(take, response_M, -jnp.inf))
  return ((high(~positive_M) <= low(positive_M))
          | (high(positive_M) <= low(~positive_M)))


def fit_calibration(response_M: jax.Array, labels_M: jax.Array, *,
                    num_newton_steps: int = 30) -> Calibration:
  r"""Unpenalised logistic regression of ``labels_M`` on ``response_M`` (Newton).

  Minimises the mean log loss of :math:`\sigma(a r + b)`; two parameters,
  so each Newton step solves a 2 x 2 system. The minimiser is finite only
  if no threshold on the response separates the two classes (ties
  included); otherwise Newton would return weights that merely grow with
  ``num_newton_steps``, so such labels are refused when concrete and give a
  NaN calibration when traced, as do traced labels outside {0, 1}.

  Args:
    response_M: ``(M,)`` real responses, ``M >= 1``, finite.
    labels_M: ``(M,)`` bool labels (or 0/1 numbers).
    num_newton_steps: an int >= 1.

  Raises:
    ValueError / TypeError: on mismatched or empty shapes, a bad
      ``num_newton_steps``, or (when concrete) non-finite responses, labels
      outside {0, 1} or separable labels (one class only among them).

  Example:
    >>> import jax.numpy as jnp
    >>> r = jnp.array([0.0, 1.0, 2.0, 3.0])
    >>> cal = fit_calibration(r, jnp.array([False, True, False, True]))
    >>> round(float(cal.weight), 2)
    0.91
  """
  if response_M.ndim != 1 or labels_M.shape != response_M.shape:
    raise ValueError(f"response_M and labels_M must be 1-D of one length; got"
                     f" {response_M.shape} and {labels_M.shape}.")
  if not response_M.shape[0]:
    raise ValueError("response_M is empty: the fit needs at least one"
                     " example of each class.")
  if not (jnp.issubdtype(response_M.dtype, jnp.floating)
          or jnp.issubdtype(response_M.dtype, jnp.integer)):
    raise TypeError(f"response_M must be real; got {response_M.dtype}.")
  check_int("num_newton_steps", num_newton_steps, 1)
  # Explicit axes refuse the Newton sums over a sharded M: fit on gathered
  # copies (the fit is two numbers).
  response_M, labels_M = tree.gather_explicit((response_M, labels_M))[0]
  labels = jnp.asarray(labels_M, jnp.float32)
  response = response_M.astype(jnp.float32)
  binary = (labels == 0) | (labels == 1)
  positive = labels > 0.5
  if is_concrete(response, labels):
    if not bool(jnp.all(jnp.isfinite(response))):
      raise ValueError("response_M must be finite; it contains NaN or inf.")
    if not bool(jnp.all(binary)):
      raise ValueError("labels_M must be bool or 0/1 labels; got values"
                       f" {np.unique(np.asarray(labels))[:5].tolist()}.")
    if float(labels.min()) == float(labels.max()):
      raise ValueError("labels_M holds one class only: the logistic fit has no"
                       " finite solution.")
    if bool(_separable(response, positive)):
      raise ValueError("labels_M are separated by a threshold on response_M:"
                       " the logistic fit has no finite solution (its weight"
                       " grows without bound).")
  features_Mx2 = jnp.stack([response, jnp.ones_like(labels)], axis=-1)

  def newton(theta, _):
    p = jax.nn.sigmoid(features_Mx2 @ theta)
    grad = features_Mx2.T @ (p - labels)
    hessian = (features_Mx2 * (p * (1 - p))[:, None]).T @ features_Mx2
    return theta - jnp.linalg.solve(hessian + 1e-9 * jnp.eye(2), grad), None

  theta = jax.lax.scan(newton, jnp.zeros(2), None, length=num_newton_steps)[0]
  theta = jnp.where(_separable(response, positive) | ~jnp.all(binary),
                    jnp.nan, theta)
  return Calibration(theta[0], theta[1])


def proposal_scores(calibration: Calibration, proposals: Proposals
                    ) -> jax.Array:
  """Confidences :math:`\\sigma(a r + b)` of the proposals, in [0, 1]."""
  return jax.nn.sigmoid(calibration.weight * proposals.response
                        + calibration.bias)
