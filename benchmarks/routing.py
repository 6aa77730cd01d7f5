"""Routing benchmarks (routing issue), printed as ratios from one run.

1. Greedy decoding throughput (TSP10 instances per second) of each model of
   the default grid, against plain-numpy nearest neighbour on the same
   1000 instances, timed in alternating rounds (ratio: model / NN speed).
2. The cost of one training step (batch 256 partial paths, Adam) per
   configuration: seconds per step over a 20-step compiled call, XLA's FLOP
   count per step, and the cost relative to D64xL2.

Untrained weights: the cost of a step or a tour does not depend on them.
Run: ``python -m benchmarks.routing``.
"""

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np

from experiments import harness
from jaxpapers import profiling
from jaxpapers import routing
from jaxpapers.routing import imitation
from jaxpapers.routing import lehd

NUM_CITIES = 10
NUM_INSTANCES = 1000
BATCH = 256
STEPS_PER_CALL = 20
ROUNDS = 5
GRID = {"D64xL1": (64, 1), "D64xL2": (64, 2), "D64xL4": (64, 4),
        "D48xL2": (48, 2), "D96xL2": (96, 2)}


def _split(width, layers):
  config = lehd.HeavyDecoderConfig(width=width, decoder_layers=layers)
  return nnx.split(lehd.HeavyDecoder(config, rngs=nnx.Rngs(0)), nnx.Param)


def decoding(coords):
  nearest = (routing.nearest_neighbour, (np.asarray(coords),))
  print(f"1. greedy decoding, {NUM_INSTANCES} TSP{NUM_CITIES} instances"
        f" ({ROUNDS} alternating rounds; ratio = model / nearest-neighbour"
        " instances per second):")
  for name, sizes in GRID.items():
    graphdef, params = _split(*sizes)
    greedy = jax.jit(lambda p, c, g=graphdef: routing.greedy_tours(
        nnx.merge(g, p), c))
    seconds = profiling.alternating_seconds(
        {"model": (greedy, (params, coords)), "nn": nearest}, rounds=ROUNDS)
    ratio = harness.paired_ratio(seconds["nn"], seconds["model"])
    print(f"  {name}: {NUM_INSTANCES / np.median(seconds['model']):9.0f}"
          f" inst/s vs NN {NUM_INSTANCES / np.median(seconds['nn']):9.0f}"
          f" inst/s: {ratio['ratio']:.3f}x"
          f" [{ratio['low']:.3f}, {ratio['high']:.3f}]")


def training(coords, tours):
  print(f"2. one training step (batch {BATCH}, Adam), {STEPS_PER_CALL} steps"
        " per compiled call:")
  tx = imitation.optimizer(1e-3, steps_per_epoch=100)
  costs = {}
  for name, sizes in GRID.items():
    graphdef, params = _split(*sizes)
    state = imitation.TrainState(params, tx.init(params))
    args = (state, coords, tours, jax.random.key(0), jnp.asarray(0))
    kwargs = dict(graphdef=graphdef, tx=tx, batch_size=BATCH)
    flops = imitation.train_steps.lower(*args, num_steps=1,
                                        **kwargs).cost_analysis()["flops"]
    seconds = profiling.time_jitted(
        lambda *a, k=kwargs: imitation.train_steps(
            *a, num_steps=STEPS_PER_CALL, **k), *args, repeats=3)
    costs[name] = (seconds / STEPS_PER_CALL, flops)
  base = costs["D64xL2"][0]
  for name, (seconds, flops) in costs.items():
    print(f"  {name}: {1e3 * seconds:7.1f} ms/step, {flops / 1e9:5.2f} GFLOP"
          f" ({flops / seconds / 1e9:5.1f} GFLOP/s), {seconds / base:.2f}x"
          " D64xL2")


def main():
  coords = jnp.asarray(routing.random_instances(0, NUM_INSTANCES, NUM_CITIES))
  tours = jnp.asarray(routing.held_karp(np.asarray(coords))[0])
  decoding(coords)
  training(coords, tours)


if __name__ == "__main__":
  main()
