"""BitResEdit cost benchmark (issue 18), printed as ratios from one run.

Editing cost per image against plain sampling on the toy bitwise-residual
generator of the experiment (scales 1..8, d = 8 bits), a batch of 64 images
vmapped in one compiled call:

1. wall time per image: the clean CFG sampler (two logit passes per scale)
   against BitResEdit (three passes on the edited prefix, the tilt, the
   trust-region projection and the masked composition), quadratic and exact
   (40 bisection steps) trust regions; median of per-round ratios over
   alternating rounds (``profiling.alternating_seconds``). Goal: <= 2x.
2. XLA's compiled memory footprint of the same calls.

On a real generator the logit passes dominate, so the ratio tends to 3/2;
the toy's passes are cheap, which makes the projection's share the largest.

Run: ``python -m benchmarks.var``.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import profiling
from jaxpapers.var import bitedit
from jaxpapers.var import editing
from jaxpapers.var import toy

NUM_IMAGES = 64
CFG_SCALE = 3.0
ROUNDS = 9


def main():
  generator = toy.toy_generator(jax.random.key(0), prompt_gain=0.5)
  keys = jax.random.split(jax.random.key(1), 4)
  source_prompts = jax.random.normal(keys[0], (NUM_IMAGES, 16))
  target_prompts = source_prompts + jax.random.normal(keys[1], (NUM_IMAGES, 16))
  noise = jax.random.split(keys[2], NUM_IMAGES)
  mask = jnp.zeros((8, 8)).at[2:6, 2:6].set(1.0)

  sample = jax.jit(jax.vmap(lambda k, p: editing.sample(
      generator, k, p, cfg_scale=CFG_SCALE)))
  sources = sample(jax.random.split(keys[3], NUM_IMAGES), source_prompts)

  def editor(trust):
    config = bitedit.bit_edit(1.0, 0.1, trust=trust)
    return jax.jit(jax.vmap(lambda k, s, sp, tp: editing.edit(
        generator, k, s, sp, tp, config, cfg_scale=CFG_SCALE, mask=mask)))

  calls = {"sample": (sample, (noise, target_prompts))}
  for trust in bitedit.TRUST_MODES:
    calls[f"edit_{trust}"] = (editor(trust), (noise, sources, source_prompts,
                                              target_prompts))
  seconds = profiling.alternating_seconds(calls, rounds=ROUNDS, repeats=5)
  for name, (fn, args) in calls.items():
    footprint = profiling.compiled_footprint(fn.lower(*args).compile())
    print(f"{name:15s} {1e6 * np.median(seconds[name]) / NUM_IMAGES:8.1f}"
          f" us/image, peak {footprint['peak_bytes'] / 2**20:6.2f} MiB"
          f" (temporaries {footprint['temp_bytes'] / 2**20:6.2f} MiB)")
    calls[name] = footprint
  for trust in bitedit.TRUST_MODES:
    ratios = (np.asarray(seconds[f"edit_{trust}"])
              / np.asarray(seconds["sample"]))
    memory = (calls[f"edit_{trust}"]["peak_bytes"]
              / calls["sample"]["peak_bytes"])
    print(f"edit ({trust}) / sample: time {np.median(ratios):.2f}x"
          f" (10-90% {np.quantile(ratios, 0.1):.2f}-"
          f"{np.quantile(ratios, 0.9):.2f}, goal <= 2x), peak memory"
          f" {memory:.2f}x")


if __name__ == "__main__":
  main()
