"""Training: relative L2, push-forward, input noise, residual steps, batches, batch loss."""

import functools

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import optax
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


def _moving_discs(num_trajectories=3, num_frames=6, size=32):
  """``(N, T, H, W, 1)`` discs on a gentle ramp, moving one pixel per frame."""
  y, x = np.mgrid[:size, :size].astype(np.float32)
  first = np.stack([np.tanh((3.0 - np.hypot(y - 4 - n, x - 5)) / 1.0)
                    + 0.01 * x for n in range(num_trajectories)])[..., None]
  return np.stack([np.roll(first, k, axis=2) for k in range(num_frames)],
                  axis=1)


def test_batches_are_pure_functions_of_seed_and_step():
  frames = np.arange(4 * 9, dtype=np.float32).reshape(4, 9, 1, 1, 1)
  batch = functools.partial(amr.sample_batch, frames, batch_size=8,
                            num_steps=2)
  a, again = batch(seed=3, step=17), batch(seed=3, step=17)
  np.testing.assert_array_equal(a.inputs, again.inputs)
  np.testing.assert_array_equal(a.targets, again.targets)
  assert not np.array_equal(a.inputs, batch(seed=3, step=18).inputs)
  assert not np.array_equal(a.inputs, batch(seed=4, step=17).inputs)
  assert a.trees is None and a.targets.shape == (8, 2, 1, 1, 1)
  # Frame values are 9 n + t: the targets are the next two frames, and every
  # start leaves room for them.
  value = a.inputs[:, 0, 0, 0]
  np.testing.assert_array_equal(a.targets[:, :, 0, 0, 0],
                                value[:, None] + np.array([1, 2]))
  assert np.all(value % 9 < 9 - 2)
  np.testing.assert_array_equal(
      jax.random.key_data(a.noise_key),
      jax.random.key_data(jax.random.fold_in(jax.random.key(3), 17)))


def test_batch_meshes_are_the_target_frames_meshes_in_a_bucket():
  trajectories = _moving_discs()
  mesh = amr.MeshConfig(4, 1, tol_frac=0.05, token_bucket=4)
  meshes = amr.trajectory_meshes(trajectories, mesh)
  assert meshes.level.shape == (3, 6, 64)
  batch = amr.sample_batch(trajectories, seed=0, step=5, batch_size=5,
                           num_steps=2, meshes=meshes, token_bucket=4)
  expected = amr.build_meshes(jnp.asarray(batch.targets[:, -1]), mesh)
  np.testing.assert_array_equal(batch.trees.num_leaves, expected.num_leaves)
  size = batch.trees.max_tokens
  assert size % 4 == 0 and size >= int(np.max(expected.num_leaves))
  assert size - 4 < int(np.max(expected.num_leaves)) < 64
  for field in ("level", "i", "j", "mask"):
    np.testing.assert_array_equal(getattr(batch.trees, field),
                                  getattr(expected, field)[:, :size])


@pytest.mark.slow  # compile-bound (20-40 s on 2 cores); CI runs -m slow
def test_batch_loss_scores_wamrvit_on_leaf_tokens_and_the_rest_on_fields():
  trajectories = _moving_discs()
  mesh = amr.MeshConfig(4, 1, tol_frac=0.05, token_bucket=16)
  batch = amr.sample_batch(trajectories, seed=0, step=0, batch_size=3,
                           num_steps=1, meshes=amr.trajectory_meshes(
                               trajectories, mesh), token_bucket=16)
  # Targets that differ from the inputs only inside the target meshes' leaves
  # (the inputs averaged over each leaf): zero error on leaf tokens, not on
  # fields. The models start with a zero decoder, so each step is identity.
  averaged = jax.vmap(amr.detokenize)(
      jax.vmap(amr.tokenize)(batch.inputs, batch.trees), batch.trees)
  batch = batch._replace(targets=averaged[:, None])
  sizes = dict(d_model=16, num_heads=1, num_layers=1, mlp_ratio=2)
  wamr = amr.WAMRViT(amr.wamrvit_config((4, 4), 1, 1, (8, 8), **sizes),
                     rngs=nnx.Rngs(0))
  vit = amr.UniformViT(amr.uniform_vit_config(4, 1, (32, 32), **sizes), 4,
                       rngs=nnx.Rngs(0))
  assert float(amr.batch_loss(wamr, batch, 1)) < 1e-6
  on_fields = float(amr.batch_loss(vit, batch._replace(trees=None), 1))
  np.testing.assert_allclose(
      on_fields, amr.relative_l2(batch.inputs, averaged), rtol=1e-6)
  assert on_fields > 1e-3


@pytest.mark.slow  # a training loop: compile-bound
def test_train_steps_are_optimizer_steps_on_the_seed_step_batches():
  trajectories = _moving_discs(num_frames=4, size=16)
  mesh = amr.MeshConfig(4, 1, tol_frac=0.05, token_bucket=4)
  meshes = amr.trajectory_meshes(trajectories, mesh)
  wamr = amr.WAMRViT(amr.wamrvit_config((4, 4), 1, 1, (4, 4), d_model=16,
                                        num_heads=1, num_layers=1,
                                        mlp_ratio=1), rngs=nnx.Rngs(0))
  graphdef, params = nnx.split(wamr, nnx.Param)
  tx = optax.sgd(0.1)
  run = functools.partial(amr.train_steps, graphdef=graphdef, tx=tx, seed=1,
                          batch_size=2, meshes=meshes, token_bucket=4)
  (got, _), record = run((params, tx.init(params)), trajectories,
                         first_step=3, num_steps=2)
  # By hand: batches (seed 1, steps 3 and 4), one SGD step on each.
  expected, losses, tokens = params, [], []
  for step in (3, 4):
    batch = amr.sample_batch(trajectories, seed=1, step=step, batch_size=2,
                             num_steps=1, meshes=meshes, token_bucket=4)
    loss, grads = jax.value_and_grad(lambda p: amr.batch_loss(
        nnx.merge(graphdef, p), batch, 1))(expected)
    expected = jax.tree.map(lambda p, g: p - 0.1 * g, expected, grads)
    losses.append(float(loss))
    tokens.append(float(np.mean(batch.trees.num_leaves)))
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5,
                                                       atol=1e-6),
               got, expected)
  assert record["train_loss"] == pytest.approx(np.mean(losses), rel=1e-5)
  assert record["train_tokens"] == pytest.approx(np.mean(tokens))
