"""jaxpapers.models under Auto and Explicit meshes gives the unsharded numbers.

Every case runs jitted on inputs sharded along the batch ("data") and/or a
feature axis ("model") of a (2, 4) mesh (see tests/sharding_checks.py,
which traces every case). nnx models are split: their parameters are placed on the
mesh (the FFN width over "model", Megatron style) and merged inside the
jitted function.
"""

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxpapers import models
from tests import nnx_sharding
from tests import sharding_checks

_rng = np.random.default_rng(0)
_f32 = lambda *shape: jnp.asarray(_rng.normal(size=shape), jnp.float32)

_LM = models.TransformerConfig(vocab_size=16, max_len=8, d_model=8,
                               num_heads=2, num_layers=1, d_ff=16)
_TOKENS = jnp.asarray(_rng.integers(0, 16, (4, 8)), jnp.int32)
_SEGMENTS = jnp.asarray(np.repeat([[0, 0, 0, 1, 1, 2, 2, 2]], 4, 0), jnp.int32)
_WINDOWS = _f32(8, 8, 4)  # (batch, lookback, channels)


_LM_4_HEADS = models.TransformerConfig(vocab_size=16, max_len=8, d_model=16,
                                      num_heads=4, num_layers=1, d_ff=16)


_COLUMNS = {"kernel": jax.P(None, "model"), "bias": jax.P("model")}
_ROWS = {"kernel": jax.P("model"), "bias": None}


def _module_case(module, shard, call, inputs, input_specs):
  graphdef, state, specs = nnx_sharding.split(module, shard)
  run = lambda state, *args: call(nnx.merge(graphdef, state), *args)
  return run, (state, *inputs), (specs, *input_specs)


def _lm_loss(model, tokens, segments):
  logits, _ = model(tokens[:, :-1], segments[:, :-1])
  mask = (segments[:, 1:] == segments[:, :-1]).astype(jnp.float32)
  return (models.next_token_loss(logits, tokens[:, 1:]),
          models.next_token_loss(logits, tokens[:, 1:], mask))


def _fsdp_spec(path, leaf, tensor_parallel):
  """FSDP: a parameter's largest even axis over "data", the batch's own axis.

  ``tensor_parallel`` maps a layer name to its leaves' specs instead (2-D
  layouts that shard along "data" and "model" at once).
  """
  names = [str(getattr(p, "key", p)) for p in path]
  for name, specs in tensor_parallel.items():
    if name in names:
      return specs[names[names.index(name) + 1]]
  shape = jnp.shape(leaf)
  if not shape or max(shape) % 2:
    return None
  entries = [None] * len(shape)
  entries[int(np.argmax(shape))] = "data"
  return jax.P(*entries)


def _fsdp_case(module, tensor_parallel):
  """The LM loss and its gradients with every parameter FSDP-sharded."""
  graphdef, state = nnx.split(module)
  specs = jax.tree_util.tree_map_with_path(
      lambda path, leaf: _fsdp_spec(path, leaf, tensor_parallel), state)
  def loss_and_grads(state, tokens, segments):
    loss = lambda state: _lm_loss(nnx.merge(graphdef, state), tokens,
                                  segments)[0]
    return jax.value_and_grad(loss)(state)
  return (loss_and_grads, (state, _TOKENS, _SEGMENTS),
          (specs, jax.P("data"), jax.P("data")))


def _fsdp_dense_case():
  """A dense layer whose kernel and bias are sharded along the batch's axis."""
  graphdef, state = nnx.split(nnx.Linear(8, 8, rngs=nnx.Rngs(1)))
  def call(state, x):
    return models.gather_fsdp_params_like(nnx.merge(graphdef, state), x)(x)
  return (call, (state, _f32(4, 8)),
          (nnx_sharding.fsdp_specs(state), jax.P("data")))


_ROWS_DATA_COLUMNS_MODEL = {"kernel": jax.P("data", "model"),
                            "bias": jax.P("model")}
_ROWS_MODEL_COLUMNS_DATA = {"kernel": jax.P("model", "data"),
                            "bias": jax.P("data")}

_MLP_PARAMS = models.init_mlp(jax.random.key(0), (8, 16, 4))


def _train_chunk_case():
  """Two members' training chunk, the windows sharded along the batch axis."""
  group = models.ForecasterGroup("penalty", 0, (0.0, 0.1), (0, 1))
  tx = models.forecaster_optimizer(1e-3, weight_decay=0.0, clip_norm=1.0)
  graphdef, state, keys = models.init_group(group, lambda key: (
      models.make_forecaster("mlp", 8, 4, key, hidden=(8, 8))), tx)
  chunk = models.make_train_chunk(group, graphdef, tx, batch_size=4,
                                  num_steps=2)

  def run(state, contexts, truths):
    # optax 0.2.8 mixes its int32 step count into Adam's float arithmetic
    # (see tests/conftest.py::standard_dtype_promotion).
    with jax.numpy_dtype_promotion("standard"):
      return chunk(state, jnp.asarray(group.lams), keys, (contexts, truths))

  return run, (state, _WINDOWS, _f32(8, 2, 4)), (None, jax.P("data"),
                                                  jax.P("data"))


_LANGUAGE_MODEL = models.LanguageModel(_LM)
_LM_PARAMS = _LANGUAGE_MODEL.init(0)
_LOOKAHEAD = models.lookahead(optax.sgd(0.1), sync_period=2, slow_step_size=0.5)
_STREAM = jnp.asarray(_rng.integers(0, 16, (64,)), jnp.int32)


def _lookahead_chunk(params, tokens):
  """Two lookahead steps on windows drawn from a (sharded) token stream."""
  held = _LOOKAHEAD.wrap_params(params)
  with jax.numpy_dtype_promotion("standard"):  # optax.lookahead mixes dtypes
    return models.train_chunk(
        _LANGUAGE_MODEL.loss, _LOOKAHEAD, held, _LOOKAHEAD.tx.init(held),
        tokens, jax.random.key(0), jnp.int32(0), num_steps=2, batch_size=4,
        length=7)
_TRAINER = models.LMTrainer(
    _LANGUAGE_MODEL, lambda lr: models.Optimizer(optax.sgd(lr)), chunk_steps=2,
    batch_size=4, length=7)


def _trainer_chunk(params, tokens, windows):
  """Two SGD steps of models.LMTrainer, then its two-point validation."""
  state = (params, optax.sgd(0.1).init(params))
  state, loss = _TRAINER.chunk(state, (0.1,), tokens, jax.random.key(0), 0)
  return state, loss, _TRAINER.validate(state, (0.1,), windows, 2)

CASES = {
    "models.Transformer+models.dense_ffn+models.MLP+models.next_token_loss"
    "+models.attention_mask": _module_case(
        models.Transformer(_LM, rngs=nnx.Rngs(0), ffn_factory=models.dense_ffn),
        # Megatron-style tensor parallelism: the FFN's hidden width ("up"
        # kernels' columns, "down" kernels' rows) and the q/k/v width (2 heads
        # do not divide over 4 devices, so the head features are gathered).
        {"up": _COLUMNS, "down": _ROWS, "qkv": _COLUMNS, "out": _ROWS},
        _lm_loss, (_TOKENS, _SEGMENTS), (jax.P("data"), jax.P("data"))),
    "models.Transformer+models.next_token_loss": _module_case(
        models.Transformer(_LM_4_HEADS, rngs=nnx.Rngs(0)),
        # The transposed layout: every kernel's input width is sharded; the
        # 4 heads divide over the 4 "model" devices.
        {"up": _ROWS, "down": _COLUMNS, "qkv": _ROWS, "out": _COLUMNS},
        _lm_loss, (_TOKENS, _SEGMENTS), (jax.P("data"), jax.P("data"))),
    # FSDP: every parameter sharded along the batch's own axis, gathered
    # block by block (before, the first bias add or slice raised).
    "models.Transformer+models.gather_fsdp_params": _fsdp_case(
        models.Transformer(_LM, rngs=nnx.Rngs(0)), {}),
    # FSDP and tensor parallelism together: kernels sharded along both axes.
    "models.Transformer+models.gather_fsdp_params+models.MLP": _fsdp_case(
        models.Transformer(_LM_4_HEADS, rngs=nnx.Rngs(0)),
        {"up": _ROWS_DATA_COLUMNS_MODEL, "qkv": _ROWS_DATA_COLUMNS_MODEL,
         "down": _ROWS_MODEL_COLUMNS_DATA, "out": _ROWS_MODEL_COLUMNS_DATA}),
    "models.gather_fsdp_params_like": _fsdp_dense_case(),
    "models.DLinear+models.moving_average": _module_case(
        models.DLinear(8, 4, 2, moving_average=3, rngs=nnx.Rngs(0)),
        {"trend": _COLUMNS, "remainder": _COLUMNS}, lambda model, w: jax.vmap(model)(w), (_WINDOWS,),
        (jax.P("data", None, "model"),)),
    "models.MLPForecaster": _module_case(
        models.MLPForecaster(8, 4, 2, hidden=(8, 8), rngs=nnx.Rngs(0)),
        {"hidden1": _COLUMNS, "hidden2": _ROWS}, lambda model, w: jax.vmap(model)(w),
        (_WINDOWS,), (jax.P("data"),)),
    "models.init_mlp+models.apply_mlp": (
        lambda key, x: models.apply_mlp(models.init_mlp(key, (8, 16, 4)), x),
        (jax.random.key(0), _f32(8, 8)), (None, jax.P("data", "model"))),
    "models.apply_mlp": (
        models.apply_mlp, (_MLP_PARAMS, _f32(8, 8)),
        ([{"w": jax.P(None, "model"), "b": jax.P("model")},
          {"w": jax.P("model"), "b": None}], jax.P("data"))),
    "models.attention_mask": (
        lambda s: models.attention_mask(s, 8), (_SEGMENTS,),
        (jax.P("data", "model"),)),
    "models.next_token_loss": (
        lambda logits, targets, mask: (
            models.next_token_loss(logits, targets),
            models.next_token_loss(logits, targets, mask)),
        (jnp.asarray(_rng.normal(size=(4, 8, 16)), jnp.float32), _TOKENS,
         jnp.asarray(_rng.random((4, 8)) < 0.6)),
        (jax.P("data", None, "model"), jax.P("data"), jax.P("data"))),
    "models.make_train_chunk": _train_chunk_case(),
    "models.moving_average": (
        jax.vmap(lambda w: models.moving_average(w, 3)), (_WINDOWS,),
        (jax.P("data", "model"),)),
    "models.LanguageModel+models.mean_loss": (
        lambda params, windows: models.mean_loss(_LANGUAGE_MODEL, params,
                                                 windows, 2),
        (_LM_PARAMS, _TOKENS), (None, jax.P("data"))),
    "models.train_chunk+models.lookahead": (
        _lookahead_chunk, (_LM_PARAMS, _STREAM), (None, jax.P("model"))),
    "models.LMTrainer": (
        _trainer_chunk, (_LM_PARAMS, _STREAM, _TOKENS),
        (None, jax.P("model"), jax.P("data"))),
}

NOT_SHARDED = {
    "models.forecast_task": "cuts a numpy series into numpy windows on the"
                            " host; no device arrays",
    "models.make_forecaster": "builds a DLinear or MLPForecaster from sizes"
                              " and a key (their sharded calls: the"
                              " models.DLinear and models.MLPForecaster cases)",
    "models.forecaster_optimizer": "an optax transform built from scalars",
    "models.init_group": "fresh state from seeds, a model factory and an"
                         " optimizer; takes no device arrays",
    "models.evaluate_members": "runs eagerly, one member at a time"
                               " (device_get per member); its jitted"
                               " per-member step is losses.free_running_errors,"
                               " a case of tests/losses/test_sharding.py",
    "models.TransformerConfig": "a frozen dataclass of static model sizes",
    "models.fsdp_gathered": "a decorator: takes a method, no arrays (its"
                            " sharded use: the amr and routing FSDP cases)",
    "models.load_corpus": "reads text files on the host; returns numpy tokens",
    "models.validation_windows": "draws the fixed windows once, before"
                                 " training (the draw: data.sample_windows's"
                                 " case)",
    "models.wsd_schedule": "a schedule factory: takes Python step counts and"
                           " a peak, no arrays",
    "models.muon_dimension_numbers": "reads only each leaf's rank and path: no"
                                     " array math",
    "models.schedule_free": "an optimizer factory: takes an optax"
                            " transformation, no arrays",
    "models.steps_to_reach": "reads host-side metric records (Python floats)",
}


# Also compared in value (which cases, and why: tests/README.md).
NUMERIC_CASES = {
    "models.attention_mask": ("Auto",),
    "models.gather_fsdp_params_like": ("Explicit",),
    "models.LanguageModel+models.mean_loss": ("Auto",),
}


(test_sharded_call_traces_like_the_unsharded_call,
 test_sharded_inputs_give_the_unsharded_numbers) = (
     sharding_checks.contract_tests(CASES, NUMERIC_CASES))


def test_fsdp_gradients_come_back_sharded_like_the_parameters(contract_mesh):
  loss_and_grads, inputs, specs = _fsdp_case(
      models.Transformer(_LM, rngs=nnx.Rngs(0)), {})
  with jax.set_mesh(contract_mesh("Explicit")):
    placed = [jax.tree.map(jax.device_put, x, spec) if spec is not None
              else x for x, spec in zip(inputs, specs)]
    _, grads = jax.jit(loss_and_grads)(*placed)
  param_specs = jax.tree.leaves(specs[0], is_leaf=lambda x: x is None
                                or isinstance(x, jax.P))
  for grad, spec in zip(jax.tree.leaves(grads), param_specs, strict=True):
    want = jax.P() if spec is None else spec
    assert jax.typeof(grad).sharding.spec == want


class _DrawsInTheForwardPass(nnx.Module):
  def __init__(self):
    self.linear = nnx.Linear(4, 4, rngs=nnx.Rngs(0))
    self.noise = nnx.Rngs(1)

  def __call__(self, x):
    return self.linear(x) + jax.random.normal(self.noise(), x.shape)


def test_gather_fsdp_params_advances_the_modules_own_rng_stream(contract_mesh):
  module = _DrawsInTheForwardPass()
  call = nnx.jit(lambda m, x: models.gather_fsdp_params(m, ("data",))(x))
  with jax.set_mesh(contract_mesh("Explicit")):
    module.linear.kernel = nnx.Param(
        jax.device_put(module.linear.kernel[...], jax.P("data")))
    x = jax.device_put(jnp.ones((4, 4)), jax.P("data"))
    first, second = call(module, x), call(module, x)
  assert module.noise.default.count[...] == 2
  assert not np.allclose(first, second)  # a fresh draw each call
  assert models.gather_fsdp_params(module, ()) is module


@pytest.mark.slow
@pytest.mark.parametrize("dispatch", ["dropless", "capacity"])
def test_fsdp_moe_transformer_gives_the_unsharded_numbers(dispatch,
                                                          contract_mesh):
  from jaxpapers import moe  # pylint: disable=g-import-not-at-top

  def lm(data_axis):
    return models.Transformer(
        _LM, rngs=nnx.Rngs(0), ffn_factory=moe.moe_ffn_factory(moe.MoEConfig(
            num_experts=4, k=2, d_hidden=8, routing="emo", dispatch=dispatch,
            data_axis=data_axis)))

  @nnx.jit
  def loss_and_grads(model, tokens, segments):
    def loss(model):
      logits, aux = model(tokens[:, :-1], segments[:, :-1])
      return models.next_token_loss(logits, tokens[:, 1:]) + sum(aux.values())
    return nnx.value_and_grad(loss)(model)

  want = loss_and_grads(lm(None), _TOKENS, _SEGMENTS)
  with jax.set_mesh(contract_mesh("Explicit")):
    model = lm("data")
    params = nnx.state(model, nnx.Param)
    nnx.update(model, jax.tree_util.tree_map_with_path(
        lambda path, x: jax.device_put(x, _fsdp_spec(path, x, {})), params))
    got = loss_and_grads(model, jax.device_put(_TOKENS, jax.P("data")),
                         jax.device_put(_SEGMENTS, jax.P("data")))
  np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
  for g, w in zip(jax.tree.leaves(got[1]), jax.tree.leaves(want[1]),
                  strict=True):
    np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
