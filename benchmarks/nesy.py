"""EM-NeSy cost benchmark (issue 15), printed as ratios from one run.

One training step (MLP 64-128-10 on the 2N digit images of 32 sums, Adam) of

* ``em``: the carry-chain E-step (forward-backward, no gradient) and the
  M-step gradient through the network only;
* ``semantic``: autodiff of log Z through the carry chain;
* ``enumeration``: EM whose E-step enumerates the 100^N worlds,

for N in {4, 15, 100}: wall time (EM and semantic timed in 9 alternating
rounds: median per-round ratio and 10-90% spread) and XLA's compiled
footprint (``jaxpapers.profiling``). Enumeration runs at N = 1 and 2, the
largest tables that fit a CPU step; for N >= 3 its gather alone needs
``4 B 100^N 2N`` bytes, printed instead. Secondary-source goal: EM 2.6x
faster than exact end-to-end NeSy with 60% less memory.

Run: ``python -m benchmarks.nesy`` (``--tiny``: N = 2 and enumeration at
N = 1, batch 4, hidden 8, one round of one repeat).
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

import benchmarks
from experiments import em_nesy
from experiments import harness
from experiments.configs import em_nesy as em_nesy_config
from jaxpapers import nesy
from jaxpapers import profiling


class Sizes(NamedTuple):
  num_digits: tuple[int, ...]
  enumerated: tuple[int, ...]  # N of the enumeration E-step
  batch_size: int | None  # None: the experiment's
  hidden: int | None  # None: the experiment's
  rounds: int
  repeats: int


FULL = Sizes(num_digits=(4, 15, 100), enumerated=(1, 2), batch_size=None,
             hidden=None, rounds=9, repeats=5)
TINY = Sizes(num_digits=(2,), enumerated=(1,), batch_size=4, hidden=8,
             rounds=1, repeats=1)


def main(tiny: bool = False):
  sizes = TINY if tiny else FULL
  config = em_nesy_config.get_config()
  if sizes.batch_size is not None:
    config.batch_size = sizes.batch_size
  if sizes.hidden is not None:
    config.hidden = sizes.hidden
  split = em_nesy.split_digits(0)
  optimizer = optax.adam(config.learning_rate)
  em_time = {}
  for n in sizes.num_digits:
    program = nesy.DigitAddition(n)
    key, x, labels, _ = em_nesy.step_inputs(config, split, n)
    calls, memory = {}, {}
    for method in ("em_exact", "semantic"):
      step = jax.jit(em_nesy.make_step(method, program, config, optimizer))
      args = (em_nesy.init_state(0, config, optimizer), key, x, labels)
      calls[method] = (step, args)
      memory[method] = profiling.compiled_footprint(
          step.lower(*args).compile())["peak_bytes"]
    seconds = profiling.alternating_seconds(calls, rounds=sizes.rounds,
                                            repeats=min(3, sizes.repeats))
    ratio = harness.paired_ratio(seconds["em_exact"], seconds["semantic"])
    em_time[n] = float(np.median(seconds["em_exact"]))
    print(f"N={n:3d}: EM {1e3 * em_time[n]:7.2f} ms, semantic"
          f" {1e3 * np.median(seconds['semantic']):7.2f} ms; EM / semantic:"
          f" time {ratio['ratio']:.3f}x [{ratio['low']:.3f}, {ratio['high']:.3f}]"
          f" (goal <= {1 / 2.6:.3f}), peak memory"
          f" {memory['em_exact'] / memory['semantic']:.3f}x (goal <= 0.4;"
          f" {memory['em_exact'] / 2**20:.2f} vs"
          f" {memory['semantic'] / 2**20:.2f} MiB)")
  for n in sizes.enumerated:
    program = nesy.addition_program(n)
    step = jax.jit(em_nesy.make_step("em_exact", program, config, optimizer))
    key, x, _, digits = em_nesy.step_inputs(config, split, n)
    totals = jnp.asarray([nesy.digits_to_int(d) for d in digits], jnp.int32)
    args = (em_nesy.init_state(0, config, optimizer), key, x, totals)
    seconds = profiling.time_jitted(step, *args, repeats=sizes.repeats)
    peak = profiling.compiled_footprint(step.lower(*args).compile())[
        "peak_bytes"]
    chain = jax.jit(em_nesy.make_step("em_exact", nesy.DigitAddition(n),
                                      config, optimizer))
    key, x, labels, _ = em_nesy.step_inputs(config, split, n)
    chain_args = (em_nesy.init_state(0, config, optimizer), key, x, labels)
    chain_seconds = profiling.time_jitted(chain, *chain_args,
                                          repeats=sizes.repeats)
    print(f"N={n:3d}: EM by enumeration of {100**n} worlds"
          f" {1e3 * seconds:7.2f} ms, peak {peak / 2**20:.2f} MiB;"
          f" carry chain / enumeration: time {chain_seconds / seconds:.3f}x")
  for n in sizes.num_digits:
    gather = 4 * config.batch_size * 100.0**n * 2 * n
    print(f"N={n:3d}: enumeration needs >= {gather:.3g} bytes for its"
          f" (B, 100^N, 2N) gather alone: infeasible; the carry chain step"
          f" takes {1e3 * em_time[n]:.2f} ms")


if __name__ == "__main__":
  benchmarks.cli(main)
