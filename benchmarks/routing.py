"""Routing benchmarks (routing issue), printed as ratios from one run.

1. Greedy decoding throughput (TSP10 instances per second) of each model of
   the default grid, against plain-numpy nearest neighbour on the same
   1000 instances, timed in alternating rounds (ratio: model / NN speed).
2. The cost of one training step (batch 256 partial paths, Adam) per
   configuration: seconds per step over a 20-step compiled call, XLA's FLOP
   count per step, and the cost relative to D64xL2.
3. Exact Held-Karp tours (``routing.held_karp``) per instance at N = 8, 10
   and 12 cities: ours on a batch (chunked by memory) against ours one
   instance at a time and a plain-Python Held-Karp (lists and bit masks,
   written for this benchmark), in alternating rounds; elkai's LKH per
   instance for context (a heuristic, where ours is exact).

Untrained weights: the cost of a step or a tour does not depend on them.
Run: ``python -m benchmarks.routing`` (``--tiny``: 8 TSP6 instances, one
model D16xL1, batch 4, 2 steps per call, Held-Karp at N = 6 on 4 instances,
one round of one repeat).
"""

import math
from typing import NamedTuple

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np

import benchmarks
from jaxpapers import profiling
from jaxpapers import routing


class Sizes(NamedTuple):
  num_cities: int
  num_instances: int
  batch: int
  steps_per_call: int
  rounds: int
  repeats: int
  grid: dict[str, tuple[int, int]]  # name: (width, decoder layers)
  base: str  # the grid's reference configuration
  exact: dict[int, tuple[int, int]]  # cities: (batch, instances one at a time)


FULL = Sizes(num_cities=10, num_instances=1000, batch=256, steps_per_call=20,
             rounds=5, repeats=3,
             grid={"D64xL1": (64, 1), "D64xL2": (64, 2), "D64xL4": (64, 4),
                   "D48xL2": (48, 2), "D96xL2": (96, 2)},
             base="D64xL2", exact={8: (2048, 16), 10: (512, 8), 12: (64, 2)})
TINY = Sizes(num_cities=6, num_instances=8, batch=4, steps_per_call=2,
             rounds=1, repeats=1, grid={"D16xL1": (16, 1)}, base="D16xL1",
             exact={6: (4, 2)})


def _split(width, layers):
  config = routing.HeavyDecoderConfig(width=width, decoder_layers=layers)
  return nnx.split(routing.HeavyDecoder(config, rngs=nnx.Rngs(0)), nnx.Param)


def decoding(coords, sizes):
  nearest = (routing.nearest_neighbour, (np.asarray(coords),))
  count = sizes.num_instances
  print(f"1. greedy decoding, {count} TSP{sizes.num_cities} instances"
        f" ({sizes.rounds} alternating rounds; ratio = model /"
        " nearest-neighbour instances per second):")
  for name, shape in sizes.grid.items():
    graphdef, params = _split(*shape)
    greedy = jax.jit(lambda p, c, g=graphdef: routing.greedy_tours(
        nnx.merge(g, p), c))
    seconds = profiling.alternating_seconds(
        {"model": (greedy, (params, coords)), "nn": nearest},
        rounds=sizes.rounds, repeats=sizes.repeats)
    ratio = profiling.paired_ratio(seconds["nn"], seconds["model"])
    print(f"  {name}: {count / np.median(seconds['model']):9.0f}"
          f" inst/s vs NN {count / np.median(seconds['nn']):9.0f}"
          f" inst/s: {ratio['ratio']:.3f}x"
          f" [{ratio['low']:.3f}, {ratio['high']:.3f}]")


def training(coords, tours, sizes):
  steps = sizes.steps_per_call
  print(f"2. one training step (batch {sizes.batch}, Adam), {steps} steps"
        " per compiled call:")
  tx = routing.optimizer(1e-3, steps_per_epoch=100)
  costs = {}
  for name, shape in sizes.grid.items():
    graphdef, params = _split(*shape)
    state = routing.TrainState(params, tx.init(params))
    args = (state, coords, tours, jax.random.key(0), jnp.asarray(0))
    kwargs = dict(graphdef=graphdef, tx=tx, batch_size=sizes.batch)
    flops = routing.train_steps.lower(*args, num_steps=1,
                                        **kwargs).cost_analysis()["flops"]
    seconds = profiling.time_jitted(
        lambda *a, k=kwargs: routing.train_steps(
            *a, num_steps=steps, **k), *args, repeats=sizes.repeats)
    costs[name] = (seconds / steps, flops)
  base = costs[sizes.base][0]
  for name, (seconds, flops) in costs.items():
    print(f"  {name}: {1e3 * seconds:7.1f} ms/step, {flops / 1e9:5.2f} GFLOP"
          f" ({flops / seconds / 1e9:5.1f} GFLOP/s), {seconds / base:.2f}x"
          f" {sizes.base}")


def held_karp_python(distances_NxN) -> float:
  """The optimal tour length of one instance: Held-Karp on Python lists."""
  d = distances_NxN.tolist()
  m = len(d) - 1
  cost = [[math.inf] * m for _ in range(1 << m)]
  for j in range(m):
    cost[1 << j][j] = d[0][j + 1]
  for mask in range(1, 1 << m):
    row = cost[mask]
    for j in range(m):
      if row[j] == math.inf:
        continue
      from_j = d[j + 1]
      for k in range(m):
        if not mask & (1 << k):
          via = row[j] + from_j[k + 1]
          if via < cost[mask | (1 << k)][k]:
            cost[mask | (1 << k)][k] = via
  return min(c + d[j + 1][0] for j, c in enumerate(cost[-1]))


def exact(sizes):
  print(f"3. Held-Karp, ms per instance ({sizes.rounds} alternating rounds;"
        " ratio = their time / ours on a batch):")
  for num_cities, (batch, singles) in sizes.exact.items():
    coords = routing.random_instances(1, batch, num_cities)
    distances = routing.distance_matrices(coords[:singles])
    lengths = routing.held_karp(coords[:singles])[1]
    python = [held_karp_python(d) for d in distances]
    assert np.allclose(python, lengths), (python, lengths)  # the same optimum
    seconds = profiling.alternating_seconds({
        "batch": (routing.held_karp, (coords,)),
        "single": (lambda c: [routing.held_karp(x[None]) for x in c], (coords[:singles],)),
        "python": (lambda d: [held_karp_python(x) for x in d], (distances,)),
    }, rounds=sizes.rounds, repeats=sizes.repeats)
    per = {"batch": batch, "single": singles, "python": singles}
    ms = {k: [1e3 * t / per[k] for t in v] for k, v in seconds.items()}
    line = (f"  N = {num_cities}: batch of {batch} {np.median(ms['batch']):.3f} ms;"
            f" one at a time {np.median(ms['single']):.3f} ms"
            f" ({_ratio(ms['single'], ms['batch'])});"
            f" plain Python {np.median(ms['python']):.3f} ms"
            f" ({_ratio(ms['python'], ms['batch'])})")
    try:
      _, lkh = profiling.call_seconds(routing.lkh_tours, coords[:singles])
    except ImportError:
      line += "; elkai not installed"
    else:
      line += f"; elkai's LKH-3 (a heuristic) {1e3 * lkh / singles:.3f} ms"
    print(line)


def _ratio(theirs, ours):
  ratio = profiling.paired_ratio(theirs, ours)
  return f"{ratio['ratio']:.2f}x [{ratio['low']:.2f}, {ratio['high']:.2f}]"


def main(tiny: bool = False):
  sizes = TINY if tiny else FULL
  coords = jnp.asarray(routing.random_instances(0, sizes.num_instances,
                                                sizes.num_cities))
  tours = jnp.asarray(routing.held_karp(np.asarray(coords))[0])
  decoding(coords, sizes)
  training(coords, tours, sizes)
  exact(sizes)


if __name__ == "__main__":
  benchmarks.cli(main)
