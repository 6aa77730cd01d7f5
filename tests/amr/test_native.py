"""Native-resolution WAMRViT: blocks vs numpy, masking, the all-finest limit, grads."""

import functools

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import amr

SIZES = dict(d_model=32, num_heads=1, num_layers=1, mlp_ratio=2)
PATCH, LEVELS, SIZE = (4, 4), 2, 32
native_tokenize = jax.vmap(functools.partial(amr.tokenize, mode="native"))


def _fields(batch=2, seed=0):
  y, x = jnp.mgrid[:SIZE, :SIZE].astype(jnp.float32)
  centres = jax.random.uniform(jax.random.key(seed), (batch, 2), maxval=SIZE)
  dist = jnp.hypot(y[None] - centres[:, 0, None, None],
                   x[None] - centres[:, 1, None, None])
  return jnp.tanh((6.0 - dist) / 1.5)[..., None]


def _trees(fields, tol_frac):
  return jax.vmap(functools.partial(
      amr.build_quadtree, patch=PATCH, tol_frac=tol_frac, max_level=LEVELS,
      max_tokens=64))(fields)


def _config():
  return amr.wamrvit_config(PATCH, 1, LEVELS, (8, 8), **SIZES)


def _randomize_zero_kernels(model, seed=7):
  """The last decoder layers start at zero; give them weights to test."""
  rng = np.random.default_rng(seed)
  for _, param in nnx.iter_graph(model):
    if isinstance(param, nnx.Param) and not np.asarray(param[...]).any():
      param[...] = jnp.asarray(0.1 * rng.standard_normal(param.shape),
                               jnp.float32)
  return model


def _model(seed=0, random_decoder=True):
  model = amr.NativeWAMRViT(_config(), PATCH, 1, LEVELS, rngs=nnx.Rngs(seed))
  return _randomize_zero_kernels(model) if random_decoder else model


@nnx.jit
def _apply(model, tokens, trees):
  return model(tokens, trees)


@pytest.fixture(scope="module")
def batch():
  fields = _fields()
  trees = _trees(fields, 0.05)
  levels = set(np.asarray(trees.level)[np.asarray(trees.mask)].tolist())
  assert levels == {0, 1, 2}  # every per-level path is in play
  return fields, trees, native_tokenize(fields, trees)


@pytest.fixture(scope="module")
def model():
  return _model()


@pytest.fixture(scope="module")
def output(model, batch):
  _, trees, tokens = batch
  return _apply(model, tokens, trees)


def _swiglu(x):
  half = x.shape[-1] // 2
  return x[..., :half] * (x[..., half:] / (1 + np.exp(-x[..., half:])))


def _conv(x_HxWxC, kernel, bias, stride, pad):
  x = np.pad(x_HxWxC, ((pad, pad), (pad, pad), (0, 0)))
  kh, kw = kernel.shape[:2]
  rows = (x.shape[0] - kh) // stride + 1
  cols = (x.shape[1] - kw) // stride + 1
  out = np.zeros((rows, cols, kernel.shape[-1]))
  for i in range(rows):
    for j in range(cols):
      window = x[i * stride:i * stride + kh, j * stride:j * stride + kw]
      out[i, j] = np.einsum("abc,abck->k", window, kernel) + bias
  return out


def _pixel_shuffle(x_HxWxC, r=2):
  """PyTorch: out[c, h r + a, w r + b] = in[c r^2 + a r + b, h, w]."""
  h, w, c = x_HxWxC.shape
  out = np.zeros((h * r, w * r, c // (r * r)))
  for ch in range(c // (r * r)):
    for a in range(r):
      for b in range(r):
        out[a::r, b::r, ch] = x_HxWxC[:, :, ch * r * r + a * r + b]
  return out


def _set_random(module, seed):
  rng = np.random.default_rng(seed)
  kernel = rng.standard_normal(module.kernel.shape).astype(np.float32)
  bias = rng.standard_normal(module.bias.shape).astype(np.float32)
  module.kernel[...], module.bias[...] = jnp.asarray(kernel), jnp.asarray(bias)
  return kernel.astype(np.float64), bias.astype(np.float64)


def test_shrink_and_expand_blocks_match_numpy():
  x = np.random.default_rng(0).standard_normal((1, 4, 6, 2)).astype(np.float32)
  shrink = amr.ShrinkBlock(2, 2, rngs=nnx.Rngs(0))
  kernel, bias = _set_random(shrink, 1)
  expected = _swiglu(_conv(x[0].astype(np.float64), kernel, bias, 2, 0))
  assert shrink(jnp.asarray(x)).shape == (1, 2, 3, 4)
  np.testing.assert_allclose(shrink(jnp.asarray(x))[0], expected, rtol=1e-5,
                             atol=1e-5)
  for gated, out_channels in ((True, 2), (False, 1)):
    expand = amr.ExpandBlock(2, out_channels, gated, rngs=nnx.Rngs(0))
    kernel, bias = _set_random(expand.conv, 2)
    assert kernel.shape[-1] == (8 if gated else 4) * out_channels
    shuffled = _pixel_shuffle(_conv(x[0].astype(np.float64), kernel, bias, 1, 1))
    expected = _swiglu(shuffled) if gated else shuffled
    got = expand(jnp.asarray(x))
    assert got.shape == (1, 8, 12, out_channels)
    np.testing.assert_allclose(got[0], expected, rtol=1e-5, atol=1e-5)


def test_output_lives_on_the_finest_grid(model, batch, output):
  fields, trees, tokens = batch
  assert output.shape == fields.shape
  untrained = _apply(_model(random_decoder=False), tokens, trees)
  np.testing.assert_array_equal(untrained, 0.0)  # residual: no change
  leaves = nnx.jit(type(model).leaf_outputs)(model, tokens, trees)
  assert [x.shape for x in leaves] == [x.shape for x in tokens]
  np.testing.assert_allclose(jax.vmap(amr.detokenize)(leaves, trees), output,
                             atol=1e-6)


def test_padded_and_other_level_slots_do_not_change_the_output(model, batch,
                                                               output):
  _, trees, tokens = batch
  noisy = []
  for level, array in enumerate(tokens):
    elsewhere = ~(trees.mask & (trees.level == level))
    noisy.append(jnp.where(elsewhere[..., None, None, None], 5.0, array))
  np.testing.assert_allclose(_apply(model, tuple(noisy), trees), output,
                             atol=1e-5)
  # A tighter budget (fewer padded slots) gives the same field.
  size = int(np.max(trees.num_leaves))
  short = tuple(t[:, :size] for t in tokens)
  np.testing.assert_allclose(
      _apply(model, short, amr.truncate(trees, size)), output, atol=1e-5)
  # Each sample depends only on its own tree and tokens.
  first = jax.tree.map(lambda x: x[:1], (tokens, trees))
  np.testing.assert_allclose(_apply(model, *first), output[:1], atol=1e-5)


def test_all_finest_leaves_equal_uniform_wamrvit_with_the_same_weights(model):
  fields = jax.random.normal(jax.random.key(3), (2, SIZE, SIZE, 1))
  trees = _trees(fields, 0.0)  # noise varies in every cell: all refined
  assert np.all(np.asarray(trees.level) == LEVELS)
  assert np.all(np.asarray(trees.mask))
  wamr = amr.WAMRViT(_config(), rngs=nnx.Rngs(1))
  nnx.update(wamr.backbone, nnx.state(model.backbone))
  uniform = jax.vmap(amr.tokenize)(fields, trees)
  expected = jax.vmap(amr.detokenize)(_apply(wamr, uniform, trees), trees)
  got = _apply(model, native_tokenize(fields, trees), trees)
  np.testing.assert_allclose(got, expected, atol=1e-5)
  assert np.abs(np.asarray(got)).max() > 1e-3
  # No Shrink/Expand block or coarse-level map is in play.
  other = _model(seed=5)
  nnx.update(other.backbone, nnx.state(model.backbone))
  np.testing.assert_allclose(
      _apply(other, native_tokenize(fields, trees), trees), got, atol=1e-6)


def test_grad_reaches_every_parameter_of_the_levels_in_the_tree(model, batch):
  fields, trees, tokens = batch
  graphdef, params = nnx.split(model, nnx.Param)
  target = jax.random.normal(jax.random.key(2), fields.shape)

  @jax.jit
  def loss(params):
    return jnp.sum(nnx.merge(graphdef, params)(tokens, trees) * target)

  grads = jax.grad(loss)(params)
  flat = jax.tree_util.tree_flatten_with_path(grads)[0]
  assert len(flat) == len(jax.tree.leaves(params))
  for path, grad in flat:
    grad = np.asarray(grad)
    assert np.isfinite(grad).all(), jax.tree_util.keystr(path)
    assert np.abs(grad).max() > 0, jax.tree_util.keystr(path)


def test_bad_inputs_are_named_errors(model, batch):
  _, trees, tokens = batch
  with pytest.raises(ValueError, match="one native array per level"):
    model(tokens[:-1], trees)
  with pytest.raises(ValueError, match="one native array per level"):
    model(tokens[-1], trees)
  with pytest.raises(ValueError, match=r"tokens\[1\] must have shape"):
    model((tokens[0], tokens[0], tokens[2]), trees)
  with pytest.raises(ValueError, match="batch of trees"):
    model(tuple(t[0] for t in tokens), jax.tree.map(lambda x: x[0], trees))
  with pytest.raises(ValueError, match="token_size"):
    amr.NativeWAMRViT(_config(), (2, 2), 1, LEVELS, rngs=nnx.Rngs(0))
  shallow = jax.vmap(functools.partial(
      amr.build_quadtree, patch=PATCH, tol_frac=0.05, max_level=1,
      max_tokens=64))(_fields())
  with pytest.raises(ValueError, match="max_level"):
    model(tokens, shallow)
