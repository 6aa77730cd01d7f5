"""The training objective: relative L2, push-forward's stop-gradient, noise, residual steps."""

import functools

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import amr

KEY = jax.random.key(0)


def test_relative_l2_closed_form():
  target = jnp.array([[3.0, 4.0], [0.0, 2.0]])
  pred = target + jnp.array([[0.0, 1.0], [1.0, 0.0]])
  # Per sample: 1/5 and 1/2; the loss is their mean.
  np.testing.assert_allclose(amr.relative_l2(pred, target), 0.35, rtol=1e-6)


def test_one_step_push_forward_is_the_plain_loss():
  x = jax.random.normal(KEY, (3, 4, 4, 1))
  targets = jax.random.normal(jax.random.key(1), (3, 2, 4, 4, 1))
  step = lambda u: 1.5 * u
  np.testing.assert_allclose(
      amr.pushforward_loss(step, x, targets, 1, noise_key=KEY),
      amr.relative_l2(step(x), targets[:, 0]), rtol=1e-6)


def test_push_forward_stops_the_gradient_between_steps():
  x = jax.random.normal(KEY, (3, 5))
  targets = jax.random.normal(jax.random.key(1), (3, 2, 5))

  def loss(a):
    return amr.pushforward_loss(lambda u: a * u, x, targets, 2, noise_key=KEY)

  def by_hand(a):
    first = a * x
    second = a * jax.lax.stop_gradient(first)
    return (amr.relative_l2(first, targets[:, 0])
            + amr.relative_l2(second, targets[:, 1])) / 2

  def backprop_through_both(a):
    return (amr.relative_l2(a * x, targets[:, 0])
            + amr.relative_l2(a * a * x, targets[:, 1])) / 2

  np.testing.assert_allclose(loss(0.7), backprop_through_both(0.7), rtol=1e-6)
  np.testing.assert_allclose(jax.grad(loss)(0.7), jax.grad(by_hand)(0.7),
                             rtol=1e-5)
  assert abs(jax.grad(loss)(0.7) - jax.grad(backprop_through_both)(0.7)) > 1e-3


def test_input_noise_goes_only_where_the_mask_allows():
  x = jnp.ones((2, 3))
  targets = jnp.ones((2, 1, 3))
  identity = lambda u: u
  loss = functools.partial(amr.pushforward_loss, identity, x, targets, 1,
                           noise_key=KEY, input_noise=0.5)
  assert float(amr.pushforward_loss(identity, x, targets, 1,
                                    noise_key=KEY)) == 0.0
  assert float(loss()) > 0.0
  assert float(loss(noise_mask=jnp.zeros((2, 1), bool))) == 0.0
  partly = jnp.array([[True], [False]])
  assert 0.0 < float(loss(noise_mask=partly)) < float(loss())


def test_residual_step_adds_each_model_output_to_its_own_state():
  config = amr.uniform_vit_config(4, 1, (16, 16), d_model=16, num_heads=1,
                                  num_layers=1, mlp_ratio=2)
  vit = amr.UniformViT(config, 4, rngs=nnx.Rngs(0))
  kernel = vit.backbone.decode.kernel  # starts at zero: give it weights
  kernel[...] = 0.1 * jax.random.normal(jax.random.key(2), kernel.shape)
  fields = jax.random.normal(KEY, (2, 16, 16, 1))

  @nnx.jit
  def both(model, fields):
    return amr.residual_step(model, fields), fields + model(fields)

  got, expected = both(vit, fields)
  np.testing.assert_array_equal(got, expected)
  assert np.abs(np.asarray(got - fields)).max() > 1e-3
  wamr = amr.WAMRViT(amr.wamrvit_config((4, 4), 1, 1, (4, 4), d_model=16,
                                        num_heads=1, num_layers=1),
                     rngs=nnx.Rngs(0))
  with pytest.raises(TypeError, match="needs the batched trees"):
    amr.residual_step(wamr, fields)


@pytest.mark.parametrize("num_steps,targets_shape,match", [
    (0, (2, 1, 3), "num_steps"), (2, (2, 1, 3), "K >= 2"),
    (1, (2, 3), "K >= 1"),
])
def test_bad_push_forward_arguments_are_named_errors(num_steps, targets_shape,
                                                     match):
  with pytest.raises(ValueError, match=match):
    amr.pushforward_loss(lambda u: u, jnp.ones((2, 3)),
                         jnp.ones(targets_shape), num_steps, noise_key=KEY)
