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

Run: ``python -m benchmarks.var`` (``--tiny``: scales 1 and 2, d = 4 bits,
2 images, one round of one repeat).
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import benchmarks
from jaxpapers import profiling
from jaxpapers import var

CFG_SCALE = 3.0
PROMPT_DIM = 16


class Sizes(NamedTuple):
  scales: tuple[int, ...]  # of the toy generator, coarse to fine
  num_bits: int
  num_images: int
  rounds: int
  repeats: int


FULL = Sizes(scales=(1, 2, 4, 8), num_bits=8, num_images=64, rounds=9,
             repeats=5)
TINY = Sizes(scales=(1, 2), num_bits=4, num_images=2, rounds=1, repeats=1)


def main(tiny: bool = False):
  sizes = TINY if tiny else FULL
  num_images = sizes.num_images
  generator = var.toy_generator(jax.random.key(0), scales=sizes.scales,
                                num_bits=sizes.num_bits,
                                prompt_dim=PROMPT_DIM, prompt_gain=0.5)
  keys = jax.random.split(jax.random.key(1), 4)
  source_prompts = jax.random.normal(keys[0], (num_images, PROMPT_DIM))
  target_prompts = source_prompts + jax.random.normal(
      keys[1], (num_images, PROMPT_DIM))
  noise = jax.random.split(keys[2], num_images)
  # The middle half of the finest scale along each side is edited.
  side = sizes.scales[-1]
  mask = jnp.zeros((side, side)).at[side // 4:3 * side // 4,
                                    side // 4:3 * side // 4].set(1.0)

  sample = jax.jit(jax.vmap(lambda k, p: var.sample(
      generator, k, p, cfg_scale=CFG_SCALE)))
  sources = sample(jax.random.split(keys[3], num_images), source_prompts)

  def editor(trust):
    config = var.bit_edit(1.0, 0.1, trust=trust)
    return jax.jit(jax.vmap(lambda k, s, sp, tp: var.edit(
        generator, k, s, sp, tp, config, cfg_scale=CFG_SCALE, mask=mask)))

  calls = {"sample": (sample, (noise, target_prompts))}
  for trust in var.TRUST_MODES:
    calls[f"edit_{trust}"] = (editor(trust), (noise, sources, source_prompts,
                                              target_prompts))
  seconds = profiling.alternating_seconds(calls, rounds=sizes.rounds,
                                          repeats=sizes.repeats)
  for name, (fn, args) in calls.items():
    footprint = profiling.compiled_footprint(fn.lower(*args).compile())
    print(f"{name:15s} {1e6 * np.median(seconds[name]) / num_images:8.1f}"
          f" us/image, peak {footprint['peak_bytes'] / 2**20:6.2f} MiB"
          f" (temporaries {footprint['temp_bytes'] / 2**20:6.2f} MiB)")
    calls[name] = footprint
  for trust in var.TRUST_MODES:
    ratios = (np.asarray(seconds[f"edit_{trust}"])
              / np.asarray(seconds["sample"]))
    memory = (calls[f"edit_{trust}"]["peak_bytes"]
              / calls["sample"]["peak_bytes"])
    print(f"edit ({trust}) / sample: time {np.median(ratios):.2f}x"
          f" (10-90% {np.quantile(ratios, 0.1):.2f}-"
          f"{np.quantile(ratios, 0.9):.2f}, goal <= 2x), peak memory"
          f" {memory:.2f}x")


if __name__ == "__main__":
  benchmarks.cli(main)
