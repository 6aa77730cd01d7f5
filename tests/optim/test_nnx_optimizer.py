"""Every optimiser of ``jaxpapers.optim`` in ``nnx.Optimizer``: the same steps as plain optax.

``nnx.Optimizer`` keeps the optimiser state in ``nnx.State`` and writes each
update back into it, which changes containers inside a param's slot (a tuple
comes back as a mapping by position): several steps, under ``nnx.jit``, must
still give exactly what ``tx.update`` on plain pytrees gives.
"""

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxpapers import optim

_X = jnp.array([[1.0, 2.0, -1.0], [3.0, -1.0, 0.5]])
_Y = jnp.array([[1.0, 0.0], [0.0, 2.0]])
NUM_STEPS = 4

OPTIMISERS = {
    "ema_nesterov": lambda: optim.ema_nesterov(optax.sgd(0.05, momentum=0.9), beta_max=0.5,
                                               gamma=0.5),
    # A refresh of the eigenbases every second step: both lax.switch branches run.
    "soap": lambda: optim.soap(0.05, precondition_frequency=2),
    "track_batch_sharpness": lambda: optax.chain(optim.track_batch_sharpness(),
                                                 optax.sgd(0.05)),
}


def _loss(params, batch):
  x, y = batch
  return jnp.mean((x @ params["kernel"] + params["bias"][None] - y) ** 2)


@pytest.mark.parametrize("name", sorted(OPTIMISERS))
def test_nnx_optimizer_steps_equal_plain_optax(name):
  model = nnx.Linear(3, 2, rngs=nnx.Rngs(0))
  pure = nnx.to_pure_dict(nnx.state(model, nnx.Param))
  tx = OPTIMISERS[name]()
  state = tx.init(pure)
  optimizer = nnx.Optimizer(model, OPTIMISERS[name](), wrt=nnx.Param)
  batch = (_X, _Y)

  def value_fn(params, batch):  # what nnx.Optimizer passes: an nnx.State
    return _loss(nnx.to_pure_dict(params), batch)

  @nnx.jit
  def step(model, optimizer):
    grads = nnx.grad(lambda m: _loss(nnx.to_pure_dict(nnx.state(m, nnx.Param)), batch))(model)
    optimizer.update(model, grads, value_fn=value_fn, batch=batch)

  for _ in range(NUM_STEPS):
    step(model, optimizer)
    grads = jax.grad(_loss)(pure, batch)
    updates, state = tx.update(grads, state, pure, value_fn=_loss, batch=batch)
    pure = optax.apply_updates(pure, updates)
  got = nnx.to_pure_dict(nnx.state(model, nnx.Param))
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6),
               got, pure)
  assert not np.allclose(got["kernel"], nnx.to_pure_dict(
      nnx.state(nnx.Linear(3, 2, rngs=nnx.Rngs(0)), nnx.Param))["kernel"])
