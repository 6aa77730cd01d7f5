r"""Rotary position embedding over several coordinate axes (3-axis RoPE).

WAMRViT encodes each leaf by its centre and its scale (the authors'
``wamrvit/quadtree_transformer.py``). The
head dimension is split into one block per axis, ``(d_x, d_y, d_s)``, each
even; in block ``a`` the consecutive pairs ``(2k, 2k+1)`` are rotated by

.. math::

   \theta_{a,k} = \text{scale}_a \, c_a \, \omega_{a,k}, \qquad
   \omega_{a,k} = \text{base}^{-2k/d_a}, \quad k = 0 .. d_a/2 - 1,

with ``c_a`` the token's coordinate on axis ``a``. Dimensions past
``sum(dims)`` are left unrotated. The dot product of a rotated query and key
depends on their coordinates only through the differences, axis by axis.

Recommended scales (author docstring): ``scale_x`` and ``scale_y`` = number of
finest cells along the axis (coordinates are in ``[0, 1]``), ``scale_s = 1``,
``d_s = 4 (L + 1)``. Our interpretation: the paper's "soft level axis" is this
continuous third coordinate.
"""

from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import tree


def rope_angles(coords_Nxa: jax.Array, dims: Sequence[int],
                scales: Sequence[float], base: float = 10000.0) -> jax.Array:
  """Rotation angles ``(..., sum(dims) / 2)`` for coordinates ``(..., A)``.

  Raises:
    ValueError: ``dims`` or ``scales`` not one entry per coordinate axis, a
      width that is not an even int >= 0, or (when concrete) a ``base`` that
      is not finite and > 0 or a scale that is not finite: ``base ** (-2k/d)``
      would be NaN or inf, a silent mix of broken frequencies.
  """
  if len(dims) != coords_Nxa.shape[-1] or len(scales) != len(dims):
    raise ValueError(
        f"dims {tuple(dims)} and scales {tuple(scales)} need one entry per"
        f" coordinate axis ({coords_Nxa.shape[-1]})."
    )
  if not isinstance(base, jax.core.Tracer) and not (
      np.isfinite(base) and base > 0):
    raise ValueError(f"base must be finite and > 0; got {base}.")
  if not any(isinstance(s, jax.core.Tracer) for s in scales) and not np.all(
      np.isfinite(np.asarray(scales, np.float64))):
    raise ValueError(f"scales must be finite; got {tuple(scales)}.")
  angles = []
  for axis, (dim, scale) in enumerate(zip(dims, scales)):
    if (not isinstance(dim, (int, np.integer)) or isinstance(dim, bool)
        or dim % 2 or dim < 0):
      raise ValueError(f"every RoPE axis needs an even size >= 0; got dims={tuple(dims)}.")
    if dim == 0:
      continue
    omega = base ** (-jnp.arange(0, dim, 2, dtype=jnp.float32) / dim)
    coord = coords_Nxa[..., axis:axis + 1].astype(jnp.float32)
    omega = omega.reshape((1,) * (coord.ndim - 1) + (-1,))
    angles.append(jnp.float32(scale) * coord * omega)
  return jnp.concatenate(angles, axis=-1)


def rope_3d(x_NxHxK: jax.Array, coords_Nx3: jax.Array, *,
            dims: Sequence[int], scales: Sequence[float],
            base: float = 10000.0) -> jax.Array:
  r"""Rotates queries or keys by their per-axis coordinates.

  Args:
    x_NxHxK: ``(..., N, H, K)``: N tokens, H heads of width K.
    coords_Nx3: ``(..., N, A)`` coordinates, usually ``(cx, cy, s)`` from
      :func:`jaxpapers.amr.leaf_coordinates` (any number of axes A works; a
      2-axis RoPE is ``dims=(d_x, d_y, 0)`` or ``A = 2``).
    dims: per-axis rotated widths, each even, ``sum(dims) <= K``.
    scales: per-axis multipliers of the coordinates.
    base: frequency base.

  Returns:
    ``x`` rotated, same shape and dtype.

  Example:
    >>> import jax.numpy as jnp
    >>> from jaxpapers import amr
    >>> q = jnp.ones((2, 1, 4))           # 2 tokens, 1 head, width 4
    >>> coords = jnp.array([[0.0, 0.0, 0.0], [0.5, 0.0, 0.0]])
    >>> out = amr.rope_3d(q, coords, dims=(2, 2, 0), scales=(jnp.pi, 1.0, 1.0))
    >>> out[1, 0].round(4).tolist()       # x pair rotated by pi/2
    [-1.0, 1.0, 1.0, 1.0]

  References:
    Su et al., RoFormer (2021); WAMRViT's abstract (a 3D rotary embedding
    with a soft level axis) and ``tonyzyl/wamrvit``,
    ``wamrvit/quadtree_transformer.py``.
  """
  width = x_NxHxK.shape[-1]
  if sum(dims) > width:
    raise ValueError(f"sum(dims)={sum(dims)} exceeds the head width {width}.")
  if coords_Nx3.shape[:-1] != x_NxHxK.shape[:-2]:
    raise ValueError(
        f"coords_Nx3 of shape {coords_Nx3.shape} must match the token axes of"
        f" x {x_NxHxK.shape[:-2]}."
    )
  rotated = sum(dims)
  if rotated == 0:
    return x_NxHxK
  spec = tree.explicit_spec(x_NxHxK)
  if spec is not None:
    # Explicit axes slice only an unsharded head width, and broadcast the
    # angles only over tokens sharded alike: the width is gathered, and the
    # coordinates take x's token sharding.
    x_NxHxK = jax.sharding.reshard(x_NxHxK, jax.P(*spec[:-1], None))
    coords_Nx3 = jax.sharding.reshard(coords_Nx3, jax.P(*spec[:-2], None))
  angles = rope_angles(coords_Nx3, dims, scales, base)[..., None, :]
  x = x_NxHxK[..., :rotated].astype(jnp.float32)
  pairs = x.reshape(*x.shape[:-1], rotated // 2, 2)
  even, odd = pairs[..., 0], pairs[..., 1]
  cos, sin = jnp.cos(angles), jnp.sin(angles)
  out = jnp.stack([even * cos - odd * sin, even * sin + odd * cos], axis=-1)
  out = out.reshape(x.shape).astype(x_NxHxK.dtype)
  return jnp.concatenate([out, x_NxHxK[..., rotated:]], axis=-1)
