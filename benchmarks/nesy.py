"""EM-NeSy cost benchmark (issue 15), printed as ratios from one run.

One training step (MLP 64-128-10 on the 2N digit images of 32 sums, Adam) of

* ``em``: the carry-chain E-step (forward-backward, no gradient) and the
  M-step gradient through the network only;
* ``semantic``: autodiff of log Z through the carry chain;
* ``enumeration``: EM whose E-step enumerates the 100^N worlds,

for N in {4, 15, 100}: wall time (every step timed in 9 alternating rounds
by :func:`jaxpapers.nesy.step_costs`: median per-round ratio and 10-90%
spread) and XLA's compiled footprint. Enumeration runs at N = 1 and 2, the
largest tables that fit a CPU step; for N >= 3 its gather alone needs
``4 B 100^N 2N`` bytes, printed instead. Secondary-source goal: EM 2.6x
faster than exact end-to-end NeSy with 60% less memory.

Run: ``python -m benchmarks.nesy`` (``--tiny``: N = 2 and enumeration at
N = 1, batch 4, hidden 8, one round of one repeat).
"""

from typing import NamedTuple

import optax

import benchmarks
from jaxpapers import data
from jaxpapers import nesy


class Sizes(NamedTuple):
  num_digits: tuple[int, ...]
  enumerated: tuple[int, ...]  # N of the enumeration E-step
  batch_size: int
  hidden: int
  rounds: int
  repeats: int


# The EM-NeSy experiment's step (experiments/configs/em_nesy.py): MLP
# 64-128-10, Adam 1e-3, batches of 32 sums.
LEARNING_RATE = 1e-3
FULL = Sizes(num_digits=(4, 15, 100), enumerated=(1, 2), batch_size=32,
             hidden=128, rounds=9, repeats=3)
TINY = Sizes(num_digits=(2,), enumerated=(1,), batch_size=4, hidden=8,
             rounds=1, repeats=1)


def main(tiny: bool = False):
  sizes = TINY if tiny else FULL
  split = data.split_digits(data.load_digits(), seed=0)
  # The chain also at the enumerated N, to compare the two E-steps there.
  chain_ns = tuple(sorted(set(sizes.num_digits) | set(sizes.enumerated)))
  costs = nesy.step_costs(
      split.train_x, split.train_labels, num_digits=chain_ns,
      enumerated=sizes.enumerated, optimizer=optax.adam(LEARNING_RATE),
      layer_sizes=(64, sizes.hidden, 10), batch_size=sizes.batch_size,
      rounds=sizes.rounds, repeats=sizes.repeats)
  chain = {int(n): c for n, c in costs["chain"].items()}
  for n in sizes.num_digits:
    c = chain[n]
    print(f"N={n:3d}: EM {1e3 * c['em_exact_seconds']:7.2f} ms, semantic"
          f" {1e3 * c['semantic_seconds']:7.2f} ms; EM / semantic:"
          f" time {c['ratio']:.3f}x [{c['low']:.3f}, {c['high']:.3f}]"
          f" (goal <= {1 / 2.6:.3f}), peak memory"
          f" {c['em_exact_peak_bytes'] / c['semantic_peak_bytes']:.3f}x (goal"
          f" <= 0.4; {c['em_exact_peak_bytes'] / 2**20:.2f} vs"
          f" {c['semantic_peak_bytes'] / 2**20:.2f} MiB)")
  for n in sizes.enumerated:
    e = costs["enumeration"][str(n)]
    print(f"N={n:3d}: EM by enumeration of {e['num_worlds']} worlds"
          f" {1e3 * e['seconds']:7.2f} ms, peak {e['peak_bytes'] / 2**20:.2f}"
          " MiB; carry chain / enumeration: time"
          f" {chain[n]['em_exact_seconds'] / e['seconds']:.3f}x")
  for n in sizes.num_digits:
    gather = 4 * sizes.batch_size * 100.0**n * 2 * n
    print(f"N={n:3d}: enumeration needs >= {gather:.3g} bytes for its"
          f" (B, 100^N, 2N) gather alone: infeasible; the carry chain step"
          f" takes {1e3 * chain[n]['em_exact_seconds']:.2f} ms")


if __name__ == "__main__":
  benchmarks.cli(main)
