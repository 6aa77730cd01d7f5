"""MoE layer benchmark (EMO issue): EMO routing vs standard top-k, one run.

Throughput of an EMO MoE layer in training mode (per-document pools drawn
per call: segment sums, per-document ranking, pool mask) over a standard
top-k layer with the same experts, forward and forward + backward, for each
way of running the experts. Goal: EMO / standard throughput >= 0.95.

Run: ``python -m benchmarks.moe`` (``--tiny``: the blocked dropless path
alone, B=2 L=16 D=16, 7 experts of hidden 16, blocks of 8, one round of one
repeat).
"""

import dataclasses
from typing import NamedTuple

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np

import benchmarks
from jaxpapers import profiling
from jaxpapers import moe


class Sizes(NamedTuple):
  batch: int
  length: int
  d_model: int
  layer: moe.MoEConfig
  paths: tuple[str, ...]  # of _paths
  block_size: int  # of the blocked grouped matmul
  rounds: int
  repeats: int


FULL = Sizes(batch=16, length=128, d_model=128,
             layer=moe.MoEConfig(num_experts=31, k=3, d_hidden=256,
                                 routing="topk"),
             paths=("dropless/blocked", "dropless/ragged_dot",
                    "capacity 1.25"),
             block_size=64, rounds=10, repeats=5)
TINY = Sizes(batch=2, length=16, d_model=16,
             layer=moe.MoEConfig(num_experts=7, k=3, d_hidden=16,
                                 routing="topk"),
             paths=("dropless/blocked",), block_size=8, rounds=1, repeats=1)


def _paths(sizes):
  return {
      "dropless/blocked": dict(dispatch="dropless", grouped_matmul="blocked",
                               block_size=sizes.block_size),
      "dropless/ragged_dot": dict(dispatch="dropless",
                                  grouped_matmul="ragged_dot"),
      "capacity 1.25": dict(dispatch="capacity", capacity_factor=1.25),
  }


def _inputs(sizes):
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=(sizes.batch, sizes.length, sizes.d_model)),
                  jnp.float32)
  # Packed documents of about 300 tokens: most rows hold one or two.
  starts = rng.random((sizes.batch, sizes.length)) < 1 / 300
  return x, jnp.asarray(np.cumsum(starts, axis=1), jnp.int32)


def _functions(d_model, config):
  graphdef, params, rest = nnx.split(moe.MoE(d_model, config, rngs=nnx.Rngs(0)),
                                     nnx.Param, ...)

  def loss(params, rest, x, segments, key):
    layer = nnx.merge(graphdef, params, rest, copy=True)
    nnx.reseed(layer, pool=key)
    y, aux = layer(x, segments)
    return jnp.mean(y ** 2) + 0.01 * aux["load_balance"] + 1e-3 * aux["router_z"]

  def forward(params, rest, x, segments, key):
    layer = nnx.merge(graphdef, params, rest, copy=True)
    nnx.reseed(layer, pool=key)
    return layer(x, segments)[0]

  return (params, rest), jax.jit(forward), jax.jit(jax.grad(loss))


def main(tiny: bool = False):
  sizes = TINY if tiny else FULL
  layer = sizes.layer
  low, high = layer.pool_range
  x, segments = _inputs(sizes)
  key = jax.random.key(1)
  print(f"MoE layer: B={sizes.batch} L={sizes.length} D={sizes.d_model},"
        f" {layer.num_experts} routed experts (hidden {layer.d_hidden}) +"
        f" shared, k={layer.k}; EMO pools ~ U{{{low}..{high}}} per document"
        " (training mode)")
  paths = _paths(sizes)
  for name in sizes.paths:
    overrides = paths[name]
    if name == "dropless/ragged_dot" and jax.default_backend() == "cpu":
      print(f"  {name}: skipped on CPU, where ragged_dot does dense work over"
            " every expert (about 10x the blocked path)")
      continue
    runs = {}
    for routing in ("topk", "emo"):
      config = dataclasses.replace(layer, routing=routing, **overrides)
      (params, rest), forward, backward = _functions(sizes.d_model, config)
      runs[routing] = [(fn, (params, rest, x, segments, key))
                       for fn in (forward, backward)]
    # Alternate the two sides so that load changes on a shared machine hit
    # both; keep each side's best.
    times = {routing: [float("inf")] * 2 for routing in runs}
    for _ in range(sizes.rounds):
      for routing, fns in runs.items():
        for i, (fn, args) in enumerate(fns):
          times[routing][i] = min(times[routing][i],
                                  profiling.time_jitted(fn, *args,
                                                        repeats=sizes.repeats))
    for i, label in enumerate(("forward", "forward+backward")):
      ratio = times["topk"][i] / times["emo"][i]
      print(f"  {name:20s} {label:17s}: EMO / standard throughput"
            f" {ratio:.2f}x (goal >= 0.95)  [{1e3 * times['emo'][i]:.1f} ms"
            f" vs {1e3 * times['topk'][i]:.1f} ms]")


if __name__ == "__main__":
  benchmarks.cli(main)
