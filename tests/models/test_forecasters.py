"""nnx forecasters: DLinear's moving average, level equivariance, linearity."""

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers.models._forecasters import DLinear
from jaxpapers.models._forecasters import MLPForecaster
from jaxpapers.models._forecasters import moving_average


@pytest.mark.parametrize("kernel", [1, 3, 4, 7])
def test_moving_average_matches_numpy_with_edge_replication(kernel):
  x = np.random.default_rng(kernel).normal(size=(7, 2)).astype(np.float32)
  front = (kernel - 1) // 2
  padded = np.concatenate([np.repeat(x[:1], front, 0), x,
                           np.repeat(x[-1:], kernel - 1 - front, 0)])
  expected = np.stack([np.convolve(padded[:, c], np.ones(kernel) / kernel,
                                   mode="valid") for c in range(2)], axis=1)
  np.testing.assert_allclose(moving_average(jnp.asarray(x), kernel), expected,
                             rtol=1e-5, atol=1e-6)
  with pytest.raises(ValueError, match="kernel must lie in"):
    moving_average(jnp.asarray(x), 8)


@pytest.mark.parametrize("make", [
    lambda: DLinear(12, 3, 2, moving_average=5, rngs=nnx.Rngs(0)),
    lambda: MLPForecaster(12, 3, 2, hidden=(8, 8), rngs=nnx.Rngs(0)),
])
def test_forecasts_move_with_the_level_of_the_window(make):
  model = make()
  window = jax.random.normal(jax.random.key(1), (12, 3))
  out = model(window)
  assert out.shape == (2, 3)
  shift = jnp.array([[5.0, -2.0, 0.5]])
  np.testing.assert_allclose(model(window + shift), out + shift, rtol=1e-5,
                             atol=1e-5)


def test_dlinear_is_affine_in_the_window():
  model = DLinear(10, 2, 1, moving_average=25, rngs=nnx.Rngs(2))
  assert model.kernel == 10  # capped at the lookback
  x, y = jax.random.normal(jax.random.key(3), (2, 10, 2))
  zero = jnp.zeros((10, 2))
  np.testing.assert_allclose(model(x + y) - model(x) - model(y) + model(zero),
                             0.0, atol=1e-5)
