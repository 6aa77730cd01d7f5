"""A plain ReLU MLP as pure functions (the EoSS reference model).

Parameters are a list of ``{"w": (d_in, d_out), "b": (d_out,)}`` dicts.
Weights are Kaiming-normal (fan-in, gain sqrt(2)) times ``init_scale``;
biases start at zero, as in the EoSS authors' presets.
"""

import math
import numbers
from typing import Sequence

import jax
import jax.numpy as jnp

from jaxpapers import tree

MLPParams = list[dict[str, jax.Array]]


def init_mlp(
    key: jax.Array,
    layer_sizes: Sequence[int],
    *,
    init_scale: float = 1.0,
    dtype: jnp.dtype = jnp.float32,
) -> MLPParams:
  """Initialises an MLP with widths ``layer_sizes = (d_in, h_1, ..., d_out)``.

  Raises:
    TypeError: a non-floating ``dtype``.
    ValueError: fewer than two widths, a width that is not an int >= 1, or a
      non-finite ``init_scale`` (every weight would be NaN or inf).
  """
  if not jnp.issubdtype(dtype, jnp.floating):
    # Casting He-normal weights to an integer type would round them to 0.
    raise TypeError(f"dtype must be a real floating dtype, got {jnp.dtype(dtype)}.")
  if len(layer_sizes) < 2 or not all(
      isinstance(s, numbers.Integral) and not isinstance(s, bool) and s >= 1
      for s in layer_sizes):
    raise ValueError(
        "layer_sizes needs at least an input and an output width, all >= 1;"
        f" got {tuple(layer_sizes)}."
    )
  if not math.isfinite(init_scale):
    raise ValueError(f"init_scale must be finite; got {init_scale}.")
  keys = jax.random.split(key, len(layer_sizes) - 1)
  params = []
  for k, d_in, d_out in zip(keys, layer_sizes[:-1], layer_sizes[1:]):
    std = init_scale * jnp.sqrt(2.0 / d_in)
    params.append({
        "w": (std * jax.random.normal(k, (d_in, d_out))).astype(dtype),
        "b": jnp.zeros((d_out,), dtype),
    })
  return params


def apply_mlp(params: MLPParams, x: jax.Array) -> jax.Array:
  """Forward pass: ReLU between layers, linear output. ``x``: ``(..., d_in)``.

  Raises ``ValueError`` for no layers, layers whose widths do not chain
  (``w`` of layer i ``(d_i, d_{i+1})``, ``b`` ``(d_{i+1},)``) or a width of
  ``x`` other than d_in.
  """
  if not params:
    raise ValueError("params must hold at least one layer.")
  width = jnp.shape(params[0]["w"])[0]
  for index, layer in enumerate(params):
    w_shape, b_shape = jnp.shape(layer["w"]), jnp.shape(layer["b"])
    if len(w_shape) != 2 or w_shape[0] != width or b_shape != w_shape[1:]:
      raise ValueError(
          f"params[{index}] must hold w ({width}, d_out) and b (d_out,); got"
          f" w {w_shape} and b {b_shape}.")
    width = w_shape[1]
  d_in = jnp.shape(params[0]["w"])[0]
  if jnp.ndim(x) < 1 or jnp.shape(x)[-1] != d_in:
    raise ValueError(
        f"x must have shape (..., d_in) with d_in = {d_in} (params[0]['w']),"
        f" got {jnp.shape(x)}.")
  for layer in params[:-1]:
    x = jax.nn.relu(_affine(layer, x))
  return _affine(params[-1], x)


def _affine(layer: dict[str, jax.Array], x: jax.Array) -> jax.Array:
  # An explicit bias reshape keeps the model valid under
  # jax_numpy_rank_promotion="raise".
  bias = layer["b"].reshape((1,) * (x.ndim - 1) + layer["b"].shape)
  # On Explicit mesh axes a sharded input width is summed over devices.
  return jnp.matmul(x, layer["w"], out_sharding=tree.contraction_spec(x)) + bias
