"""jaxpapers.models: a table of misuse, each a named error."""

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import models

_PARAMS = models.init_mlp(jax.random.key(0), (3, 2))
_LM = models.Transformer(
    models.TransformerConfig(vocab_size=16, max_len=8, d_model=8, num_heads=2,
                             num_layers=1, d_ff=8), rngs=nnx.Rngs(0))

MISUSE = [
    # Integer weights would round the He-normal draws to zero.
    (lambda: models.init_mlp(jax.random.key(0), (3, 4), dtype=jnp.int32),
     TypeError, "dtype must be a real floating dtype, got int32"),
    (lambda: models.init_mlp(jax.random.key(0), (3,)), ValueError,
     "at least an input and an output width"),
    (lambda: models.init_mlp(jax.random.key(0), (3, 0, 2)), ValueError,
     "all >= 1"),
    (lambda: models.apply_mlp(_PARAMS, jnp.ones((2, 4))), ValueError,
     r"x must have shape \(..., d_in\) with d_in = 3"),
    (lambda: models.next_token_loss(jnp.zeros((2, 3, 5)), jnp.zeros((2, 4),
                                                                     jnp.int32)),
     ValueError, r"targets_BxL must have shape \(B, L\) = \(2, 3\)"),
    (lambda: models.next_token_loss(jnp.zeros((2, 3, 5)), jnp.zeros((2, 3))),
     TypeError, "targets_BxL must hold integer token ids"),
    (lambda: models.next_token_loss(jnp.zeros((2, 3, 5)),
                                    jnp.full((2, 3), 5, jnp.int32)),
     ValueError, r"targets_BxL holds ids in \[5, 5\]; .* \[0, 5\)"),
    (lambda: models.next_token_loss(jnp.zeros((2, 3, 5)),
                                    jnp.zeros((2, 3), jnp.int32),
                                    jnp.ones((2, 2))),
     ValueError, r"mask_BxL must have shape \(B, L\) = \(2, 3\)"),
    (lambda: models.attention_mask(jnp.zeros((2, 3), jnp.int32), 4),
     ValueError, r"segment_ids_BxL must have shape \(B, length=4\)"),
    (lambda: models.moving_average(jnp.ones((4,)), 3), ValueError,
     r"x_LxC must have shape \(L, C\)"),
    (lambda: models.DLinear(4, 2, 0, rngs=nnx.Rngs(0)), ValueError,
     "out_rows must be an int >= 1"),
    (lambda: models.MLPForecaster(4, 2, 1, hidden=(8, 8), rngs=nnx.Rngs(0))(
        jnp.ones((2, 4, 2))), ValueError,
     r"window_LxC must have shape \(lookback, channels\) = \(4, 2\)"),
    (lambda: _LM(jnp.zeros((2, 3))), TypeError,
     "tokens_BxL must hold integer token ids"),
    (lambda: _LM(jnp.full((2, 3), 16, jnp.int32)), ValueError,
     r"tokens_BxL holds ids in \[16, 16\]"),
    (lambda: _LM(jnp.zeros((2, 3), jnp.int32), jnp.zeros((2, 4), jnp.int32)),
     ValueError, "segment_ids_BxL .* must have the shape of tokens_BxL"),
    (lambda: models.init_mlp(jax.random.key(0), (3, 2), init_scale=np.nan),
     ValueError, "init_scale must be finite"),
    (lambda: models.init_mlp(jax.random.key(0), (3, 2.5)), ValueError,
     "all >= 1"),
    (lambda: models.apply_mlp([_PARAMS[0], {"w": jnp.ones((5, 2)),
                                            "b": jnp.ones(2)}],
                              jnp.ones((1, 3))),
     ValueError, r"params\[1\] must hold w \(2, d_out\)"),
    # NaN fails "< 1": a NaN size used to pass.
    (lambda: models.TransformerConfig(d_ff=np.nan), ValueError,
     "d_ff must be an int >= 1"),
    (lambda: models.TransformerConfig(num_heads=2.0), ValueError,
     "num_heads must be an int >= 1"),
    (lambda: models.attention_mask(None, 2.5), ValueError,
     "length must be an int >= 1"),
    (lambda: models.moving_average(jnp.ones((4, 2)), 2.5), ValueError,
     "kernel must lie in"),
    (lambda: models.DLinear(4, 2, 1, moving_average=np.nan, rngs=nnx.Rngs(0)),
     ValueError, "moving_average must be an int >= 1"),
    # min((8, nan)) is 8: a NaN width used to pass.
    (lambda: models.MLPForecaster(4, 2, 1, hidden=(8, np.nan),
                                  rngs=nnx.Rngs(0)),
     ValueError, r"hidden\[1\] must be an int >= 1"),
]


def test_traced_out_of_range_targets_make_the_loss_nan():
  loss = jax.jit(models.next_token_loss)
  logits = jnp.zeros((1, 2, 4))
  assert np.isfinite(loss(logits, jnp.array([[1, 3]])))
  for bad in (4, -1):  # negative ids do not wrap around to the last token
    assert np.isnan(loss(logits, jnp.array([[1, bad]])))


@pytest.mark.parametrize("index", range(len(MISUSE)))
def test_misuse_is_a_named_error(index):
  call, error, message = MISUSE[index]
  with pytest.raises(error, match=message):
    call()
