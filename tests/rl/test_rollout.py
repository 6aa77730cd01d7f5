"""Cached decoding against the full forward; sampled rollouts against the shell; one update.

``training.rl_step`` and ``training.evaluate`` run whole in the experiment's
smoke test (tests/experiments); ``training.multi_run`` and
``training.warm_start_chunk`` are compared with the steps they scan here.
"""

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxpapers import models
from jaxpapers.rl import _rollout as rollout
from jaxpapers.rl import _shell as shell
from jaxpapers.rl import _training as training

LAYOUT = shell.ShellLayout(num_turns=2, format_warnings=False)


def _split_model(num_layers):
  config = models.TransformerConfig(
      vocab_size=shell.VOCAB_SIZE, max_len=LAYOUT.length, d_model=16,
      num_heads=2, num_layers=num_layers, d_ff=32)
  return nnx.split(models.Transformer(config, rngs=nnx.Rngs(0)))


@pytest.fixture(scope="module")
def split_model():
  """One layer: compiling rollouts and updates dominates these tests' time."""
  return _split_model(1)


@pytest.fixture(scope="module")
def tasks():
  return shell.make_tasks(1, 16, LAYOUT, 1, 2)[0]


def test_cached_decoding_matches_the_full_forward(tasks):
  split_model = _split_model(2)  # two layers: each has its own cache slice
  tokens = jnp.concatenate([tasks.prompt[:2], tasks.prompt[:2, :2]], 1)

  @jax.jit
  def both(params):
    model = nnx.merge(split_model[0], params)
    cache = rollout.init_cache(model, 2, LAYOUT.length)
    chunk, cache = rollout.decode(model, cache, tokens[:, :25], 0)
    steps = []
    for position in range(25, tokens.shape[1]):  # one token at a time
      logits, cache = rollout.decode(
          model, cache, tokens[:, position:position + 1], position)
      steps.append(logits[:, 0])
    return jnp.concatenate([chunk, jnp.stack(steps, 1)], 1), model(tokens)[0]

  got, expected = both(split_model[1])
  np.testing.assert_allclose(got, expected, atol=2e-5)


# A training loop, rollout or run: 4-6 s cold (tests/README.md).
@pytest.mark.slow
def test_sampled_rollouts_replay_through_the_shell(split_model, tasks):
  graphdef, params = split_model
  out = jax.jit(lambda p, k: rollout.sample_split(
      graphdef, p, tasks, k, LAYOUT, temperature=1.0))(params, jax.random.key(3))
  assert out.tokens.shape == (16, LAYOUT.length)
  commands = jnp.stack([out.tokens[:, LAYOUT.command_start(t):
                                   LAYOUT.command_start(t) + LAYOUT.command_len]
                        for t in range(LAYOUT.num_turns)], 1)
  replay = shell.scripted(tasks, commands, LAYOUT)
  np.testing.assert_array_equal(replay.tokens, out.tokens)
  np.testing.assert_array_equal(replay.reward, out.reward)
  for a, b in zip(replay.spans, out.spans):
    np.testing.assert_array_equal(a, b)
  with pytest.raises(ValueError, match="max_len"):
    rollout.sample(nnx.merge(graphdef, params), tasks, jax.random.key(0),
                   shell.ShellLayout(num_turns=3), temperature=1.0)


# A training loop, rollout or run: 4-6 s cold (tests/README.md).
@pytest.mark.slow
def test_one_update(split_model, tasks, standard_dtype_promotion):
  """The update of :func:`training.rl_step` on fixed transcripts (its rollout is tested above)."""
  del standard_dtype_promotion  # optax's Adam mixes int32 counts into floats
  graphdef, params = split_model
  tx = training.optimizer(1e-3, 1)
  config = training.RLConfig(tasks_per_step=2, group_size=2)
  transcripts = jax.jit(training.random_transcripts, static_argnums=(2, 3))(
      jax.random.key(1), tasks, 4, LAYOUT)
  advantages = jnp.array([1.0, -1.0, 0.5, -0.5])

  @jax.jit
  def step(params, opt_state, world_only):
    (loss, aux), grads = jax.value_and_grad(training.rl_loss, has_aux=True)(
        params, graphdef, transcripts, advantages, jnp.float32(0.05),
        world_only, LAYOUT, config)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss, aux

  # Step 0 of the warm-up has learning rate 0; step 1 moves the params.
  new, opt_state, _, _ = step(params, tx.init(params), jnp.bool_(False))
  new, _, loss, aux = step(new, opt_state, jnp.bool_(False))
  assert np.isfinite(float(loss)) and float(aux["env"]) > 0
  moved = jax.tree.map(lambda a, b: bool(jnp.any(a != b)), new, params)
  assert any(jax.tree.leaves(moved))
  # world_model_only: no policy term at all, the loss is lam * env.
  _, _, loss, aux = step(params, opt_state, jnp.bool_(True))
  assert float(aux["policy"]) == 0.0
  np.testing.assert_allclose(loss, 0.05 * aux["env"], rtol=1e-6)
  with pytest.raises(ValueError, match="group_size"):
    training.RLConfig(group_size=1)


@pytest.mark.slow
def test_multi_run_steps_each_run_as_rl_step_alone(split_model, tasks,
                                                   standard_dtype_promotion):
  del standard_dtype_promotion  # optax's Adam mixes int32 counts into floats
  graphdef, params = split_model
  tx = training.optimizer(1e-3, 0)
  config = training.RLConfig(tasks_per_step=2, group_size=2)
  probe = jax.jit(training.random_transcripts, static_argnums=(2, 3))(
      jax.random.key(1), tasks, 4, LAYOUT)
  runs = training.multi_run(
      graphdef, (tasks, tasks, probe), tx, LAYOUT, config, lam=[0.0, 0.05],
      world_model_only=[False, True], seeds=[3, 4],
      lambda_scale=lambda step: 0.5, eval_temperature=0.8, eval_samples=1)
  stacked = jax.tree.map(lambda x: jnp.stack([x, x]), params)
  (new, _), metrics = runs.chunk((stacked, jax.vmap(tx.init)(stacked)),
                                 jnp.int32(5), 1)
  assert metrics["loss"].shape == (2,)
  # Run 1 alone: its seed's key folded with step 5, lam 0.05 x 0.5, no verifier.
  alone, _, alone_metrics = jax.jit(
      training.rl_step, static_argnums=(0, 7, 8, 9))(
          graphdef, params, tx.init(params),
          jax.random.fold_in(jax.random.key(4), 5), tasks, jnp.float32(0.025),
          jnp.bool_(True), tx, LAYOUT, config)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a[1], b, rtol=1e-4,
                                                       atol=1e-6), new, alone)
  np.testing.assert_allclose(metrics["loss"][1], alone_metrics["loss"],
                             rtol=1e-4)
  evaluation = runs.evaluate(new, jnp.int32(6))
  assert evaluation["pass_at_1"].shape == evaluation["env_ce"].shape == (2,)


@pytest.mark.slow  # a training loop: compile-bound
def test_warm_start_chunk_scans_warm_start_steps(split_model, tasks,
                                                 standard_dtype_promotion):
  del standard_dtype_promotion
  graphdef, params = split_model
  tx, key = training.optimizer(1e-3, 0), jax.random.key(7)
  chunk = training.warm_start_chunk(graphdef, tasks, tx, LAYOUT, 2, key)
  (new, _), losses = chunk((params, tx.init(params)), jnp.int32(3), 2)
  step = jax.jit(training.warm_start_step, static_argnums=(0, 5, 6, 7))
  state = (params, tx.init(params))
  expected = []
  for t in (3, 4):
    *state, loss = step(graphdef, *state, jax.random.fold_in(key, t), tasks,
                        tx, LAYOUT, 2)
    expected.append(loss)
  np.testing.assert_allclose(losses, expected, rtol=1e-5)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5,
                                                       atol=1e-7),
               new, state[0])
