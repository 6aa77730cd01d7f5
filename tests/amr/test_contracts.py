"""jaxpapers.amr: a table of misuse, each a named error at call (trace) time."""

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import amr

_FIELD = jnp.zeros((8, 8)).at[1, 5].set(1.0)
_TREE = amr.build_quadtree(_FIELD, patch=2, tol_frac=0.1, max_level=1,
                           max_tokens=16)
_TOKENS = amr.tokenize(_FIELD, _TREE)
_TREES = jax.tree.map(lambda x: jnp.stack([x, x]), _TREE)
_CONFIG = amr.wamrvit_config((2, 2), 1, 1, (4, 4), d_model=16, num_heads=1,
                             num_layers=1, mlp_ratio=1)
_MESH = amr.MeshConfig(patch=2, max_level=1, tol_frac=0.1)
_FRAMES = np.zeros((2, 3, 8, 8, 1), np.float32)
_BACKBONE = amr.TokenBackbone(_CONFIG, rngs=nnx.Rngs(0))
_GRAPHDEF = nnx.split(_BACKBONE, nnx.Param)[0]
_COORDS = jnp.zeros((2, 16, 3))
_MASK = jnp.ones((2, 16), jnp.bool_)
_RECORD = {"vrmse": 0.1, "vrmse_roi": 0.2, "tokens": 4.0, "tokens_per_s": 1.0,
           "ms_per_step": 1.0, "finite": True}

MISUSE = [
    (lambda: amr.make_geometry((8, 8), (2.5, 2), 1),
     ValueError, "patch must be a positive int"),
    # Mismatched levels used to fail deep inside the 2x2 pooling.
    (lambda: amr.balance((jnp.zeros((2, 2), jnp.bool_),
                          jnp.zeros((2, 2), jnp.bool_))),
     ValueError, r"refined\[1\] must be a bool 2-D grid of shape \(4, 4\)"),
    (lambda: amr.balance((jnp.zeros((2, 2)),)),
     ValueError, r"refined\[0\] must be a bool 2-D grid"),
    (lambda: amr.tokenize(_FIELD.astype(jnp.int32), _TREE),
     ValueError, "tokenize: field must be a floating"),
    (lambda: amr.tokenize(jnp.zeros((2, 8, 8, 1)), _TREE),
     ValueError, r"tokenize: field must be a floating \(H, W\)"),
    # Tokens of another budget used to scatter into the wrong slots.
    (lambda: amr.detokenize(_TOKENS[:8], _TREE),
     ValueError, r"detokenize: tokens must have shape \(16, 2, 2, C\)"),
    (lambda: amr.detokenize(amr.tokenize(_FIELD, _TREE, "native")[::-1], _TREE),
     ValueError, r"detokenize: tokens\[0\] must have shape \(16, 4, 4, C\)"),
    (lambda: amr.regrid(_TOKENS, _TREE, tol_frac=0.1, max_tokens=2),
     ValueError, "max_tokens must be an int >= the number of root tiles"),
    (lambda: amr.regrid(_TOKENS, _TREES, tol_frac=0.1),
     ValueError, "regrid expects one tree"),
    (lambda: amr.swiglu(jnp.ones((2, 5))),
     ValueError, "swiglu: x_NxC needs an even last"),
    (lambda: amr.pixel_shuffle(jnp.ones((1, 2, 2, 6))),
     ValueError, r"pixel_shuffle: x_NxHxWxC must be \(N, H, W, C r\^2\)"),
    (lambda: amr.pixel_shuffle(jnp.ones((1, 2, 2, 4)), factor=0),
     ValueError, "pixel_shuffle: factor must be an int >= 1"),
    (lambda: amr.ShrinkBlock(0, rngs=nnx.Rngs(0)),
     ValueError, "ShrinkBlock: channels and multiplier must be >= 1"),
    (lambda: amr.ShrinkBlock(2, rngs=nnx.Rngs(0))(jnp.ones((1, 3, 4, 2))),
     ValueError, r"ShrinkBlock: x_NxHxWxC must be \(N, H, W, 2\) with even H"),
    (lambda: amr.ExpandBlock(2, 0, gated=True, rngs=nnx.Rngs(0)),
     ValueError, "ExpandBlock: in_channels and out_channels must be >= 1"),
    (lambda: amr.BackboneConfig(token_size=4, rope_dims=(2, 2)),
     ValueError, r"rope_dims and rope_scales need 3 entries"),
    (lambda: _BACKBONE(jnp.ones((2, 16, 5)), _COORDS, _MASK),
     ValueError, r"tokens_BxNxF must be \(B, N, 4\)"),
    (lambda: _BACKBONE(jnp.ones((2, 16, 4)), _COORDS[:, :8], _MASK),
     ValueError, r"coords_BxNx3 must be \(2, 16, 3\)"),
    (lambda: _BACKBONE(jnp.ones((2, 16, 4)), _COORDS, _MASK.astype(jnp.int32)),
     ValueError, "mask_BxN must be bool"),
    (lambda: amr.ParallelBlock(_CONFIG, rngs=nnx.Rngs(0))(
        jnp.ones((2, 16, 8)), _COORDS, _MASK),
     ValueError, r"x_BxNxD must be \(B, N, 16\)"),
    # Tokens of another budget than the trees' used to be read anyway.
    (lambda: amr.WAMRViT(_CONFIG, rngs=nnx.Rngs(0))(
        jnp.stack([_TOKENS[:8]] * 2), _TREES),
     ValueError, r"WAMRViT: tokens_BxTxPhxPwxC must be \(B, T, Ph, Pw, C\)"),
    (lambda: amr.patchify(jnp.ones((1, 6, 8, 1)), 4),
     ValueError, "H and W multiples of the patch 4"),
    (lambda: amr.unpatchify(jnp.ones((1, 2, 2, 4))),
     ValueError, r"cells must be \(B, H/p, W/p, p, p, C\)"),
    (lambda: amr.UniformViT(_CONFIG, 0, rngs=nnx.Rngs(0)),
     ValueError, "patch must be an int >= 1"),
    (lambda: amr.MeshConfig(patch=0, max_level=1, tol_frac=0.1),
     ValueError, "patch must be a positive int"),
    (lambda: amr.MeshConfig(patch=2, max_level=-1, tol_frac=0.1),
     ValueError, "max_level must be an int >= 0"),
    (lambda: amr.bucket_size(np.array([5]), 0, 16),
     ValueError, "multiple must be an int >= 1"),
    (lambda: amr.regrid_native(jnp.zeros((3, 8, 8, 1)), _TREES, _MESH),
     ValueError, r"fields_BxHxWxC must be \(B, H, W, C\) for a batch of B"),
    # Mismatched shapes used to broadcast into a wrong loss.
    (lambda: amr.relative_l2(jnp.ones((2, 1)), jnp.ones((2, 3))),
     ValueError, "pred and target must have one shape"),
    (lambda: amr.pushforward_loss(lambda u: u, jnp.ones((2, 3)),
                                  jnp.ones((2, 1, 4)), 1,
                                  noise_key=jax.random.key(0)),
     ValueError, r"targets must be \(B, K >= 1, ...\)"),
    (lambda: amr.pushforward_loss(lambda u: u, jnp.ones((2, 3)),
                                  jnp.ones((2, 1, 3)), 1,
                                  noise_key=jax.random.key(0),
                                  input_noise=-0.1),
     ValueError, "input_noise must be >= 0"),
    (lambda: amr.trajectory_meshes(_FRAMES[0], _MESH),
     ValueError, r"trajectories_NxTxHxWxC must be \(N, T, H, W, C\)"),
    # num_steps = T used to fail inside NumPy's integer draw.
    (lambda: amr.sample_batch(_FRAMES, seed=0, step=0, batch_size=2,
                              num_steps=3),
     ValueError, r"num_steps must be an int in \[1, T = 3\)"),
    (lambda: amr.sample_batch(_FRAMES, seed=0, step=0, batch_size=0,
                              num_steps=1),
     ValueError, "batch_size must be an int >= 1"),
    (lambda: amr.sample_batch(_FRAMES, seed=0, step=0, batch_size=2,
                              num_steps=1, meshes=_TREES),
     ValueError, r"meshes must be trajectory_meshes of the trajectories"),
    (lambda: amr.batch_loss(amr.WAMRViT(_CONFIG, rngs=nnx.Rngs(0)),
                            amr.TrainingBatch(jnp.zeros((2, 8, 8, 1)),
                                              jnp.zeros((2, 1, 8, 8, 1)), None,
                                              jax.random.key(0)), 1),
     TypeError, "WAMRViT needs batch.trees"),
    (lambda: amr.vrmse(np.zeros((2, 4, 4, 1)), np.zeros((2, 4, 4))),
     ValueError, r"must both be \(B, H, W, 1\)"),
    (lambda: amr.vrmse(np.zeros((2, 4, 4, 1)), np.ones((2, 4, 4, 1)),
                       np.ones((2, 4))),
     ValueError, r"mask_BxHxW must be \(2, 4, 4\)"),
    (lambda: amr.evaluate_rollout(lambda call: iter(()), _FRAMES,
                                  np.zeros((2, 3, 8))),
     ValueError, r"roi_BxKxHxW must be \(2, 3, 8, 8\)"),
    (lambda: amr.summarize_rollout([], 1, 1.0),
     ValueError, "records is empty"),
    (lambda: amr.summarize_rollout([_RECORD], 2, 1.0),
     ValueError, r"short_steps must be an int in \[1, 1\]"),
    # NaN fails "vrmse < valid_vrmse": no step used to count as valid.
    (lambda: amr.summarize_rollout([_RECORD], 1, float("nan")),
     ValueError, "valid_vrmse must be > 0"),
    (lambda: amr.rope_3d(jnp.ones((2, 1, 4)), jnp.ones((2, 3)), dims=(2, 2, 0),
                         scales=(1.0, 1.0, 1.0), base=0.0),
     ValueError, "base must be finite and > 0"),
    (lambda: amr.rope_3d(jnp.ones((2, 1, 4)), jnp.ones((2, 3)), dims=(2, 2, 0),
                         scales=(float("nan"), 1.0, 1.0)),
     ValueError, "scales must be finite"),
    (lambda: amr.rope_3d(jnp.ones((2, 1, 4)), jnp.ones((2, 3)),
                         dims=(2.0, 2, 0), scales=(1.0, 1.0, 1.0)),
     ValueError, "every RoPE axis needs an even size >= 0"),
    (lambda: amr.BackboneConfig(token_size=4, mlp_ratio=float("nan")),
     ValueError, "mlp_ratio must be an int >= 1"),
    (lambda: amr.BackboneConfig(token_size=4,
                                rope_scales=(16.0, float("inf"), 1.0)),
     ValueError, "rope_scales must be finite"),
    # int() used to truncate a float patch to a smaller one.
    (lambda: amr.MeshConfig(patch=(2, 2.5), max_level=1, tol_frac=0.1),
     ValueError, "patch must be a positive int or \\(Ph, Pw\\)"),
    (lambda: amr.MeshConfig(patch=2.5, max_level=1, tol_frac=0.1),
     ValueError, "patch must be a positive int"),
    (lambda: amr.make_geometry((8, 8), 2, True), ValueError,
     "max_level must be an int >= 0"),
    (lambda: amr.bucket_size(np.array([], np.int32), 4, 16), ValueError,
     "num_leaves is empty"),
    (lambda: amr.finest_pixels(_TREES), ValueError,
     "finest_pixels expects one tree"),
    (lambda: amr.regrid(_TOKENS, _TREE, tol_frac=0.1, max_passes=2.5),
     ValueError, "max_passes an int >= 0"),
    (lambda: amr.pushforward_loss(lambda u: u, jnp.ones((2, 3)),
                                  jnp.ones((2, 1, 3)), 1,
                                  noise_key=jax.random.key(0),
                                  input_noise=float("inf")),
     ValueError, "input_noise must be >= 0 and finite"),
    (lambda: amr.pushforward_loss(lambda u: u, jnp.ones((2, 3)),
                                  jnp.ones((2, 1, 3)), 1,
                                  noise_key=jax.random.key(0),
                                  noise_mask=jnp.ones((5,), jnp.bool_)),
     ValueError, "noise_mask must broadcast to the state's shape"),
    (lambda: amr.sample_batch(_FRAMES, seed=-1, step=0, batch_size=2,
                              num_steps=1),
     ValueError, "seed must be an int >= 0"),
    (lambda: amr.sample_batch(_FRAMES, seed=0, step=-1, batch_size=2,
                              num_steps=1),
     ValueError, "step must be an int >= 0"),
    (lambda: amr.train_steps({}, _FRAMES, graphdef=_GRAPHDEF, tx=None, seed=0,
                             first_step=0, num_steps=1, batch_size=2),
     TypeError, r"state must be a \(params, opt_state\) pair"),
    (lambda: amr.train_steps((None, None), _FRAMES, graphdef=None, tx=None,
                             seed=0, first_step=0, num_steps=1, batch_size=2),
     TypeError, "graphdef must be an nnx.GraphDef"),
    (lambda: amr.train_steps((None, None), _FRAMES, graphdef=_GRAPHDEF,
                             tx=None, seed=0, first_step=0, num_steps=0,
                             batch_size=2),
     ValueError, "num_steps must be an int >= 1"),
]


@pytest.mark.parametrize("index", range(len(MISUSE)))
def test_misuse_is_a_named_error(index):
  call, error, message = MISUSE[index]
  with pytest.raises(error, match=message):
    call()
