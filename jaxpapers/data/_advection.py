r"""2-D linear advection of sharp discs: PDE trajectories with moving fronts.

Data set (a) of our WAMRViT CPU protocol (``docs/wamrvit.md``):
:math:`u_t + a \cdot \nabla u = 0` on a
periodic ``N x N`` grid, so :math:`u(x, t) = u_0(x - a t)` exactly. The
initial condition is a few discs with ``tanh`` edges on a smooth random
background; it is a closed-form function of position, so every frame is
evaluated exactly at shifted coordinates (a Fourier shift gives the same
field up to the Gibbs ringing of the discrete transform).

Disc ``d`` with centre :math:`c_d`, radius :math:`r_d`, amplitude
:math:`A_d` contributes :math:`A_d (1 + \tanh((r_d - |x - c_d|) / w)) / 2`
with periodic (minimum-image) distance; the background is a sum of Fourier
modes with wavenumbers up to ``background_modes`` and total amplitude
``background_amplitude``. Our choice: the default
background amplitude stays below a 2% refinement tolerance on 8-pixel cells,
so the mesh follows the fronts rather than the background.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import tree
from jaxpapers._checks import check_int


def advection_trajectory(key: jax.Array, *, num_steps: int, size: int = 64,
                         velocity: tuple[float, float] = (1.0, 0.5),
                         min_discs: int = 2, max_discs: int = 4,
                         radius_range: tuple[float, float] = (5.0, 10.0),
                         edge_width: float = 1.5,
                         background_amplitude: float = 0.01,
                         background_modes: int = 2) -> jax.Array:
  """One trajectory ``(num_steps + 1, size, size)`` float32, frame 0 the initial field.

  Args:
    key: PRNG key; the trajectory is a pure function of it.
    num_steps: number of steps after the initial frame.
    size: grid side ``N`` (pixels).
    velocity: ``(a_x, a_y)`` in pixels per step (x = columns, y = rows).
    min_discs: fewest discs.
    max_discs: most discs (static: the number is drawn in
      ``[min_discs, max_discs]`` and the rest get amplitude 0).
    radius_range: ``(low, high)`` disc radii, pixels, ``0 <= low <= high``.
    edge_width: ``w > 0`` of the ``tanh`` edge, pixels.
    background_amplitude: sum of the background modes' amplitudes, ``>= 0``.
    background_modes: largest background wavenumber per axis.

  Returns:
    ``u[t, y, x]`` for ``t = 0 .. num_steps``.

  Raises:
    ValueError: for ``num_steps < 0``, ``size < 1``, ``background_modes <
      0`` or not ``0 <= min_discs <= max_discs`` (the static arguments), and
      for concrete values of the others outside their ranges above or not
      finite (``velocity`` must be two finite numbers). Traced values cannot
      be checked: a reversed or negative ``radius_range`` and an
      ``edge_width <= 0`` then make every frame NaN when there can be discs
      (``max_discs >= 1``), where a reversed range would otherwise still
      draw radii between its ends and a negative width invert the discs;
      NaN or inf in any of them propagates as NaN.

  Example:
    >>> import jax
    >>> from jaxpapers.data import advection_trajectory
    >>> u = advection_trajectory(jax.random.key(0), num_steps=4, size=32,
    ...                          velocity=(2.0, 0.0))
    >>> u.shape
    (5, 32, 32)
    >>> bool(jax.numpy.allclose(u[2], jax.numpy.roll(u[0], 4, axis=1), atol=1e-5))
    True
  """
  for name, value, low in (("num_steps", num_steps, 0), ("size", size, 1),
                           ("background_modes", background_modes, 0),
                           ("min_discs", min_discs, 0),
                           ("max_discs", max_discs, 0)):
    check_int(name, value, low)
  if not 0 <= min_discs <= max_discs:
    raise ValueError(
        f"need 0 <= min_discs <= max_discs; got {min_discs}, {max_discs}.")
  for name, value in (("velocity", velocity), ("radius_range", radius_range)):
    if np.shape(value) != (2,):
      raise ValueError(f"{name} must be two numbers; got shape"
                       f" {np.shape(value)}.")
  for name, value in (("edge_width", edge_width),
                      ("background_amplitude", background_amplitude)):
    if np.shape(value) != ():
      raise ValueError(f"{name} must be a scalar; got shape {np.shape(value)}.")
  velocity_, radii_, width_, amplitude_ = (
      _concrete(x) for x in (velocity, radius_range, edge_width,
                             background_amplitude))
  if velocity_ is not None and not np.all(np.isfinite(velocity_)):
    raise ValueError(
        f"velocity must be finite; got {tuple(velocity_.tolist())}.")
  if radii_ is not None and not (np.all(np.isfinite(radii_))
                                 and 0 <= radii_[0] <= radii_[1]):
    raise ValueError(
        "radius_range must be finite (low, high) with 0 <= low <= high; got"
        f" {tuple(radii_.tolist())}.")
  if width_ is not None and not (np.isfinite(width_) and width_ > 0):
    raise ValueError(f"edge_width must be finite and > 0; got {width_}.")
  if amplitude_ is not None and not (np.isfinite(amplitude_)
                                     and amplitude_ >= 0):
    raise ValueError(
        f"background_amplitude must be finite and >= 0; got {amplitude_}.")
  return _trajectory(key, num_steps=num_steps, size=size, velocity=velocity,
                     min_discs=min_discs, max_discs=max_discs,
                     radius_range=radius_range, edge_width=edge_width,
                     background_amplitude=background_amplitude,
                     background_modes=background_modes)


def _concrete(x) -> np.ndarray | None:
  """``x`` as a float64 array, or None where it holds a traced value."""
  if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(x)):
    return None
  return np.asarray(x, np.float64)


@functools.partial(jax.jit, static_argnames=(
    "num_steps", "size", "min_discs", "max_discs", "background_modes"))
def _trajectory(key, *, num_steps, size, velocity, min_discs, max_discs,
                radius_range, edge_width, background_amplitude,
                background_modes):
  keys = jax.random.split(key, 7)
  count = jax.random.randint(keys[0], (), min_discs, max_discs + 1)
  present = jnp.arange(max_discs) < count
  centres = jax.random.uniform(keys[1], (max_discs, 2), maxval=size)
  radii = jax.random.uniform(keys[2], (max_discs,), minval=radius_range[0],
                             maxval=radius_range[1])
  # Traced ranges are unchecked (see advection_trajectory): out of range,
  # every frame is NaN.
  in_range = ((0 <= radius_range[0]) & (radius_range[0] <= radius_range[1])
              & (edge_width > 0))
  radii = jnp.where(in_range, radii, jnp.nan)
  amplitudes = jnp.where(
      present, jax.random.uniform(keys[3], (max_discs,), minval=0.5,
                                  maxval=1.0), 0.0)
  modes = jnp.arange(-background_modes, background_modes + 1)
  ky, kx = jnp.meshgrid(modes, modes, indexing="ij")
  weights = jax.random.normal(keys[4], ky.shape)
  weights = jnp.where((ky == 0) & (kx == 0), 0.0, weights)
  weights = background_amplitude * weights / jnp.sum(jnp.abs(weights))
  phases = jax.random.uniform(keys[5], ky.shape, maxval=2 * jnp.pi)

  grid = jnp.arange(size, dtype=jnp.float32)
  wavenumber = 2 * jnp.pi / size

  def per_mode(a):
    # One merge, then new axes: Explicit sharding of a batch (under vmap)
    # refuses a reshape that merges and adds axes at once.
    flat = tree.merge_axes(a, 0) if a.ndim == 2 else a
    return flat[:, None, None]

  def frame(t):
    # Exact solution: the initial field at the back-traced positions.
    y = (grid.reshape(1, -1, 1) - velocity[1] * t) * jnp.ones((1, 1, size))
    x = (grid.reshape(1, 1, -1) - velocity[0] * t) * jnp.ones((1, size, 1))
    angle = wavenumber * (per_mode(ky.astype(jnp.float32)) * y
                          + per_mode(kx.astype(jnp.float32)) * x)
    u = jnp.sum(per_mode(weights) * jnp.cos(angle + per_mode(phases)), axis=0)
    dy = y - per_mode(centres[:, 0])
    dx = x - per_mode(centres[:, 1])
    dy = dy - size * jnp.round(dy / size)  # minimum image on the torus
    dx = dx - size * jnp.round(dx / size)
    dist = jnp.sqrt(dy ** 2 + dx ** 2)
    edge = 0.5 * (1 + jnp.tanh((per_mode(radii) - dist) / edge_width))
    return u + jnp.sum(per_mode(amplitudes) * edge, axis=0)

  times = jnp.arange(num_steps + 1, dtype=jnp.float32)
  return jax.vmap(frame)(times)


def advection_dataset(seed: int, num_trajectories: int, **kwargs) -> jax.Array:
  """``(num_trajectories, num_steps + 1, size, size)``: trajectory ``n`` from ``fold_in(key(seed), n)``.

  ``kwargs`` go to :func:`advection_trajectory`; ``num_trajectories`` must be
  >= 1 (``ValueError``).
  """
  check_int("num_trajectories", num_trajectories, 1)
  keys = jax.vmap(functools.partial(jax.random.fold_in, jax.random.key(seed))
                  )(jnp.arange(num_trajectories))
  return jax.vmap(functools.partial(advection_trajectory, **kwargs))(keys)
