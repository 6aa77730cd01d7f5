"""jaxpapers.models: a table of misuse, each a named error."""

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxpapers import models

_PARAMS = models.init_mlp(jax.random.key(0), (3, 2))
_LM = models.Transformer(
    models.TransformerConfig(vocab_size=16, max_len=8, d_model=8, num_heads=2,
                             num_layers=1, d_ff=8), rngs=nnx.Rngs(0))
_LM_CONFIG = models.TransformerConfig(max_len=4, d_model=8, num_heads=2,
                                      num_layers=1, d_ff=8)
_LANGUAGE_MODEL = models.LanguageModel(_LM_CONFIG)

_GROUP = models.ForecasterGroup("penalty", 0, (0.0,), (0,))
_TX = models.forecaster_optimizer(1e-3, weight_decay=0.0, clip_norm=1.0)
_MAKE = lambda key: models.make_forecaster("mlp", 4, 1, key, hidden=(4, 4))


def _chunk_call(group, truth_rows):
  graphdef, state, keys = models.init_group(group, _MAKE, _TX)
  chunk = models.make_train_chunk(group, graphdef, _TX, batch_size=2,
                                  num_steps=1)
  windows = (jnp.ones((3, 4, 1)), jnp.ones((3, truth_rows, 1)))
  return chunk(state, jnp.zeros(len(group.seeds)), keys, windows)


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
    (lambda: models.LanguageModel({"max_len": 8}), TypeError,
     "config must be a models.TransformerConfig"),
    (lambda: models.LanguageModel(_LM_CONFIG, ffn_factory="dense"), TypeError,
     "ffn_factory must be callable"),
    (lambda: _LANGUAGE_MODEL.loss(None, jnp.zeros((2, 1), jnp.int32)),
     ValueError, r"windows_BxL1 must have shape \(B, L \+ 1\)"),
    (lambda: models.mean_loss(_LANGUAGE_MODEL, None,
                              jnp.zeros((3, 5), jnp.int32), 2),
     ValueError, "multiple of batch_size=2"),
    (lambda: models.wsd_schedule(1.0, num_steps=10, warmup_steps=0,
                                 decay_start=5),
     ValueError, "warmup_steps must be an int >= 1"),
    # decay_start past the end would make the decay negative and clip to 0.
    (lambda: models.wsd_schedule(1.0, num_steps=10, warmup_steps=1,
                                 decay_start=11),
     ValueError, r"decay_start must be an int in \[0, 10\]"),
    (lambda: models.wsd_schedule(np.nan, num_steps=10, warmup_steps=1,
                                 decay_start=5),
     ValueError, "peak must be finite"),
    (lambda: models.lookahead(optax.sgd(1.0), 0, 0.5), ValueError,
     "sync_period must be an int >= 1"),
    (lambda: models.lookahead(optax.sgd(1.0), 2, 1.5), ValueError,
     "slow_step_size must"),
    (lambda: models.schedule_free(optax.sgd), TypeError,
     "tx must be an optax.GradientTransformation"),
    (lambda: models.train_chunk(
        lambda p, w: (0.0, {}), optax.sgd(0.1), {}, (), jnp.zeros(8, jnp.int32),
        jax.random.key(0), 0, num_steps=1, batch_size=1, length=2),
     TypeError, "optimizer must be a models.Optimizer"),
    (lambda: models.train_chunk(
        lambda p, w: (0.0, {}), models.Optimizer(optax.sgd(0.1)), {}, (),
        jnp.zeros(8, jnp.int32), jax.random.key(0), 0, num_steps=0,
        batch_size=1, length=2),
     ValueError, "num_steps must be an int >= 1"),
    (lambda: models.validation_windows(np.zeros((2, 8), np.int32), 2, 4),
     ValueError, "tokens must be 1-D"),
    (lambda: models.load_corpus(source_files=0, valid_fraction=0.1),
     ValueError, "source_files must be an int >= 1"),
    (lambda: models.load_corpus(source_files=1, valid_fraction=1.0),
     ValueError, "valid_fraction must"),
    (lambda: models.LMTrainer(_LM_CONFIG, lambda: None, chunk_steps=1,
                              batch_size=1, length=1), TypeError,
     "model must be a models.LanguageModel"),
    (lambda: models.LMTrainer(_LANGUAGE_MODEL, None, chunk_steps=1,
                              batch_size=1, length=1), TypeError,
     "make_optimizer must be callable"),
    (lambda: models.LMTrainer(_LANGUAGE_MODEL, lambda: None, chunk_steps=0,
                              batch_size=1, length=1), ValueError,
     "chunk_steps must be an int >= 1"),
    (lambda: models.LMTrainer(_LANGUAGE_MODEL, lambda: None, chunk_steps=1,
                              batch_size=1, length=1).init(0), TypeError,
     "make_optimizer must return a models.Optimizer"),
    (lambda: models.steps_to_reach([{"step": 10, "valid_bpb": 2.0},
                                    {"step": 0, "valid_bpb": 1.0}], 1.5),
     ValueError, "increasing step order"),
    (lambda: models.steps_to_reach([{"step": 0, "loss": 2.0}], 1.5),
     ValueError, "every record needs 'step' and 'valid_bpb'"),
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
