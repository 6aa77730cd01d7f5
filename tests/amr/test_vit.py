"""WAMRViT and the uniform ViT: masking, equivariance, shared blocks."""

import functools

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxpapers import amr

SIZES = dict(d_model=32, num_heads=1, num_layers=2, mlp_ratio=2)


def _fields(batch=2, seed=0):
  y, x = jnp.mgrid[:32, :32].astype(jnp.float32)
  centres = jax.random.uniform(jax.random.key(seed), (batch, 2), maxval=32)
  dist = jnp.hypot(y[None] - centres[:, 0, None, None],
                   x[None] - centres[:, 1, None, None])
  return jnp.tanh((6.0 - dist) / 1.5)


def _model(seed=0, random_decoder=True):
  config = amr.wamrvit_config((4, 4), 1, 1, (8, 8), **SIZES)
  model = amr.WAMRViT(config, rngs=nnx.Rngs(seed))
  if random_decoder:  # the decoder starts at zero; give it weights to test
    kernel = model.backbone.decode.kernel
    kernel[...] = 0.1 * jax.random.normal(jax.random.key(7), kernel.shape)
  return model


@nnx.jit
def _apply(model, *args):
  return model(*args)


@pytest.fixture(scope="module")
def batch():
  fields = _fields()
  trees = jax.vmap(functools.partial(
      amr.build_quadtree, patch=4, tol_frac=0.05, max_level=1,
      max_tokens=64))(fields)
  return fields, trees, jax.vmap(amr.tokenize)(fields, trees)


def test_untrained_model_predicts_no_change(batch):
  _, trees, tokens = batch
  out = _apply(_model(random_decoder=False), tokens, trees)
  np.testing.assert_array_equal(out, 0.0)


def test_padding_does_not_change_the_real_tokens(batch):
  _, trees, tokens = batch
  model = _model()
  size = int(np.max(trees.num_leaves))
  full = _apply(model, tokens, trees)
  short = _apply(model, tokens[:, :size], amr.truncate(trees, size))
  np.testing.assert_allclose(full[:, :size], short, atol=1e-5)
  assert not np.asarray(full[:, size:]).any()
  # Garbage in the padded slots is masked out of attention.
  noisy = tokens.at[:, size:].set(5.0)
  np.testing.assert_allclose(_apply(model, noisy, trees)[:, :size], short,
                             atol=1e-5)


def test_token_order_does_not_matter(batch):
  _, trees, tokens = batch
  model = _model()
  count = int(trees.num_leaves[0])
  one = jax.tree.map(lambda x: x[:1], trees)
  perm = np.concatenate([np.random.default_rng(0).permutation(count),
                         np.arange(count, one.max_tokens)])
  shuffled = jax.tree_util.tree_map(
      lambda x: x[:, perm] if x.ndim == 2 else x, one)
  out = _apply(model, tokens[:1], one)
  np.testing.assert_allclose(_apply(model, tokens[:1, perm], shuffled),
                             out[:, perm],
                             atol=1e-5)


def test_models_at_the_same_patch_have_the_same_parameters():
  def count(model):
    return sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param)))
  wamr = _model(random_decoder=False)
  vit = amr.UniformViT(amr.uniform_vit_config(4, 1, (32, 32), **SIZES), 4,
                       rngs=nnx.Rngs(0))
  assert count(wamr) == count(vit)
  d = SIZES["d_model"]
  per_block = d * (3 * d + 2 * 2 * d) + (d + 2 * d) * d + 2 * (d // 1)
  assert count(vit) == 16 * d + d + 2 * per_block + d * 16 + 16


def test_uniform_vit_rope_sees_patch_positions():
  vit = amr.UniformViT(amr.uniform_vit_config(8, 1, (32, 32), **SIZES), 8,
                       rngs=nnx.Rngs(0))
  kernel = vit.backbone.decode.kernel
  kernel[...] = 0.1 * jax.random.normal(jax.random.key(1), kernel.shape)
  field = jnp.zeros((1, 32, 32, 1)).at[0, 0:8, 0:8].set(1.0)
  out = _apply(vit, field)
  assert out.shape == field.shape
  # Identical empty patches at different distances from the bump differ.
  assert not np.allclose(out[0, 8:16, 8:16], out[0, 24:32, 24:32])


@pytest.mark.usefixtures("standard_dtype_promotion")
def test_a_few_adamw_steps_fit_one_batch(batch):
  fields, trees, tokens = batch
  targets = jax.vmap(amr.tokenize)(jnp.roll(fields, 1, axis=2), trees)
  model = _model(random_decoder=False)
  graphdef, params = nnx.split(model, nnx.Param)
  tx = optax.adamw(3e-3)

  def loss_fn(params):
    pred = tokens + nnx.merge(graphdef, params)(tokens, trees)
    return jnp.mean((pred - targets) ** 2)

  @jax.jit
  def step(params, opt_state):
    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  opt_state = tx.init(params)
  first = float(jax.jit(loss_fn)(params))
  for _ in range(30):
    params, opt_state, _ = step(params, opt_state)
  assert float(jax.jit(loss_fn)(params)) < 0.5 * first


def test_bad_sizes_are_named_errors():
  with pytest.raises(ValueError, match="divisible by num_heads"):
    amr.BackboneConfig(token_size=16, d_model=30, num_heads=4)
  with pytest.raises(ValueError, match="no room for x/y RoPE"):
    amr.wamrvit_config((4, 4), 1, 3, (8, 8), d_model=16, num_heads=1)
