r"""A residual low-rank adapter and a cosine classifier head, as nnx modules.

The adapter is the bottleneck of AdaptFormer / TUNA-style parameter-efficient
tuning on frozen features (Chen et al., 2022, https://arxiv.org/abs/2205.13535):

.. math::
  h = x + \mathrm{ReLU}(x W_{down}) W_{up}, \qquad
  W_{down} \in \mathbb{R}^{D \times r}, \ W_{up} \in \mathbb{R}^{r \times D},

with :math:`W_{down}` random and :math:`W_{up} = 0` at initialisation, so the
adapter starts as the identity. The head scores a feature by the scaled cosine
of the angle to one prototype per class (Hou et al., "Learning a unified
classifier incrementally via rebalancing", CVPR 2019):
:math:`s \cos(h, w_c)`, with :math:`s = 20` by default.

Shapes: B batch, D feature width, R adapter rank, C classes.
"""

from flax import nnx
import jax
import jax.numpy as jnp

from jaxpapers import tree
from jaxpapers._checks import check_int
from jaxpapers._checks import check_real


def check_features(x_BxD: jax.Array, features: int) -> None:
  """Raises unless ``x_BxD`` is a real floating ``(..., features)`` array."""
  if x_BxD.ndim < 1 or x_BxD.shape[-1] != features:
    raise ValueError(f"x_BxD must end in the feature width {features};"
                     f" got shape {x_BxD.shape}.")
  tree.check_real_floating(x_BxD, "x_BxD")


class LowRankAdapter(nnx.Module):
  """``x + relu(x @ down) @ up`` on ``(..., D)`` features.

  Example:
    >>> import jax.numpy as jnp
    >>> from flax import nnx
    >>> from jaxpapers.continual import LowRankAdapter
    >>> adapter = LowRankAdapter(8, 2, rngs=nnx.Rngs(0))
    >>> x = jnp.ones((3, 8))
    >>> bool(jnp.all(adapter(x) == x))  # the up-projection starts at zero
    True

  Example (flax nnx training step), fitting frozen features to new targets:
    >>> import numpy as np, optax
    >>> from jaxpapers import optim
    >>> features = np.float32(np.random.default_rng(0).normal(size=(16, 8)))
    >>> targets = np.roll(features, 1, axis=1)  # any map the adapter can fit
    >>> loss = lambda a: jnp.mean((a(features) - targets) ** 2)
    >>> optimizer = nnx.Optimizer(
    ...     adapter, optim.ema_nesterov(optax.sgd(0.1, momentum=0.9)),
    ...     wrt=nnx.Param)
    >>> @nnx.jit
    ... def train_step(adapter, optimizer):
    ...   value, grads = nnx.value_and_grad(loss)(adapter)
    ...   optimizer.update(adapter, grads)
    ...   return value
    >>> losses = [train_step(adapter, optimizer) for _ in range(10)]
    >>> bool(losses[-1] < losses[0])
    True
  """

  def __init__(self, features: int, rank: int, *, rngs: nnx.Rngs):
    check_int("features", features, 1)
    check_int("rank", rank, 1)
    scale = 1.0 / jnp.sqrt(jnp.asarray(features, jnp.float32))
    self.down_DxR = nnx.Param(
        scale * jax.random.normal(rngs.params(), (features, rank)))
    self.up_RxD = nnx.Param(jnp.zeros((rank, features)))

  def __call__(self, x_BxD: jax.Array) -> jax.Array:
    check_features(x_BxD, self.down_DxR.shape[0])
    # Weights sharded along an Explicit axis are gathered (FSDP-style): the
    # rank axis is contracted, and a sharded contraction is refused there.
    down_DxR, up_RxD = tree.gather_explicit(
        (self.down_DxR[...], self.up_RxD[...]))[0]
    hidden_BxR = jax.nn.relu(x_BxD @ down_DxR)
    return x_BxD + hidden_BxR @ up_RxD


class CosineClassifier(nnx.Module):
  """Logits ``scale * cos(x, prototype_c)`` for ``num_classes`` prototypes.

  Example:
    >>> import jax.numpy as jnp
    >>> from flax import nnx
    >>> from jaxpapers.continual import CosineClassifier
    >>> head = CosineClassifier(4, 3, rngs=nnx.Rngs(0))
    >>> logits = head(jnp.ones((2, 4)))
    >>> logits.shape, bool(jnp.all(jnp.abs(logits) <= 20.0 + 1e-5))
    ((2, 3), True)
  """

  def __init__(self, features: int, num_classes: int, *, scale: float = 20.0,
               rngs: nnx.Rngs):
    check_int("features", features, 1)
    check_int("num_classes", num_classes, 1)
    check_real("scale", scale, low=0.0, low_open=True)
    self.scale = scale
    self.prototypes_CxD = nnx.Param(
        jax.random.normal(rngs.params(), (num_classes, features)))

  def __call__(self, x_BxD: jax.Array) -> jax.Array:
    check_features(x_BxD, self.prototypes_CxD.shape[1])
    # Prototypes sharded along an Explicit axis are gathered (FSDP-style): a
    # class axis sharded like the batch, or a feature axis sharded unlike
    # x's, has no output sharding there.
    w_CxD = tree.gather_explicit(self.prototypes_CxD[...])[0]
    return self.scale * _unit_rows(x_BxD) @ _unit_rows(w_CxD).T


def _unit_rows(x):
  """``x / |x|`` along the last axis; a zero row stays zero.

  The cosine is scale-free, so each row is first divided by its largest
  magnitude (a constant for the gradient): no fixed epsilon biases small
  rows, and neither tiny nor huge rows under- or overflow the squares.
  """
  scale = jax.lax.stop_gradient(jnp.max(jnp.abs(x), axis=-1, keepdims=True))
  x = x / jnp.where(scale == 0, 1, scale)
  squares = jnp.sum(x * x, axis=-1, keepdims=True)
  # 1 for a zero row (then x is 0): also keeps sqrt's gradient finite there.
  return x / jnp.sqrt(jnp.where(squares == 0, 1, squares))
