"""ECHO's cost (issue 16): one update with the environment loss vs GRPO alone.

The update of the experiment's default (a byte GPT of d = 64, 2 layers; 4
tasks x 8 rollouts of the 4-turn shell, 169 tokens each), on transcripts
sampled once: one forward pass, token log-probs, the loss, its gradient and
the optimizer step. ECHO adds ``lambda`` times the environment cross-entropy
of the same log-probs (:func:`jaxpapers.rl.echo_loss`); GRPO alone is
the PPO-clip term (:func:`jaxpapers.rl.ppo_clip_loss`). Goal: ECHO <=
1.05x GRPO in time and in compiled peak memory (the same forward pass).
Also printed: the whole step with the rollout (sampling dominates it).

Times are the median of per-round ratios over alternating rounds
(``profiling.alternating_seconds``), so machine load hits both sides.

Run: ``python -m benchmarks.echo`` (``--tiny``: a 1-turn shell, a d = 16
model, 2 tasks x 2 rollouts, one round).
"""

from typing import NamedTuple

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import optax

import benchmarks
from jaxpapers import data as data_lib
from jaxpapers import models
from jaxpapers import profiling
from jaxpapers import rl


class Sizes(NamedTuple):
  num_turns: int
  tasks_per_step: int
  group_size: int
  pool: int
  d_model: int
  num_heads: int
  num_layers: int
  rounds: int
  repeats: int


FULL = Sizes(num_turns=4, tasks_per_step=4, group_size=8, pool=256,
             d_model=64, num_heads=4, num_layers=2, rounds=9, repeats=3)
TINY = Sizes(num_turns=1, tasks_per_step=2, group_size=2, pool=8, d_model=16,
             num_heads=2, num_layers=1, rounds=1, repeats=1)


def main(tiny: bool = False):
  sizes = TINY if tiny else FULL
  layout = rl.ShellLayout(num_turns=sizes.num_turns, format_warnings=False)
  config = rl.RLConfig(tasks_per_step=sizes.tasks_per_step,
                             group_size=sizes.group_size)
  model = models.Transformer(models.TransformerConfig(
      vocab_size=rl.SHELL_VOCAB_SIZE, max_len=layout.length,
      d_model=sizes.d_model, num_heads=sizes.num_heads,
      num_layers=sizes.num_layers, d_ff=4 * sizes.d_model), rngs=nnx.Rngs(0))
  graphdef, params = nnx.split(model)
  # The experiment's tasks (2-4 commands) at FULL; at most one per turn.
  pool, _ = rl.make_tasks(0, sizes.pool, layout,
                             min_commands=min(2, sizes.num_turns),
                             max_commands=sizes.num_turns)
  batch = config.tasks_per_step * config.group_size
  transcripts = jax.jit(lambda p, k: rl.rollout_sample_split(
      graphdef, p, data_lib.take(pool, jnp.arange(batch)), k, layout,
      temperature=config.temperature))(params, jax.random.key(1))
  group_ids = jnp.repeat(jnp.arange(config.tasks_per_step), config.group_size)
  advantages = rl.grpo_advantages(transcripts.reward, group_ids)
  tx = rl.rl_optimizer()
  opt_state = tx.init(params)

  def update(loss_fn):
    def step(params, opt_state):
      grads = jax.grad(loss_fn)(params)
      updates, opt_state = tx.update(grads, opt_state, params)
      return optax.apply_updates(params, updates), opt_state
    return jax.jit(step)

  def echo_objective(params):
    return rl.rl_loss(params, graphdef, transcripts, advantages,
                            jnp.float32(0.05), jnp.bool_(False), layout,
                            config)[0]

  def grpo_objective(params):
    log_probs = rl.transcript_log_probs(graphdef, params,
                                              transcripts.tokens,
                                              config.temperature)
    masks = rl.shift_for_next_token(rl.echo_masks(
        transcripts.spans, length=layout.length))
    return rl.ppo_clip_loss(log_probs, jax.lax.stop_gradient(log_probs),
                              advantages, masks.action)[0]

  steps = {"echo": update(echo_objective), "grpo": update(grpo_objective)}
  args = (params, opt_state)
  seconds = profiling.alternating_seconds(
      {name: (fn, args) for name, fn in steps.items()}, rounds=sizes.rounds,
      repeats=sizes.repeats)
  ratios = np.asarray(seconds["echo"]) / np.asarray(seconds["grpo"])
  memory = {name: profiling.compiled_footprint(fn.lower(*args).compile())
            for name, fn in steps.items()}
  for name in steps:
    print(f"{name:5s} update: {1e3 * np.median(seconds[name]):8.2f} ms,"
          f" compiled peak {memory[name]['peak_bytes'] / 2**20:7.2f} MiB")
  print(f"ECHO / GRPO update time: median {np.median(ratios):.3f}x"
        f" (10-90%: {np.quantile(ratios, 0.1):.3f}-"
        f"{np.quantile(ratios, 0.9):.3f}, {sizes.rounds} alternating rounds;"
        " goal <= 1.05)")
  print(f"ECHO / GRPO peak memory: "
        f"{memory['echo']['peak_bytes'] / memory['grpo']['peak_bytes']:.3f}x"
        " (goal <= 1.05)")

  def full_step(lam):
    return jax.jit(lambda p, o: rl.rl_step(
        graphdef, p, o, jax.random.key(2), pool, lam, jnp.bool_(False), tx,
        layout, config)[:2])
  full = profiling.time_jitted(full_step(jnp.float32(0.05)), *args,
                                repeats=sizes.repeats)
  print(f"whole ECHO step with its rollout: {1e3 * full:8.1f} ms")


if __name__ == "__main__":
  benchmarks.cli(main)
