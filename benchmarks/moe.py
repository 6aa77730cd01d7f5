"""MoE layer benchmark (EMO issue): EMO routing vs standard top-k, one run.

Throughput of an EMO MoE layer in training mode (per-document pools drawn
per call: segment sums, per-document ranking, pool mask) over a standard
top-k layer with the same experts, forward and forward + backward, for each
way of running the experts. Goal: EMO / standard throughput >= 0.95.

Run: ``python -m benchmarks.moe``.
"""

import dataclasses

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import profiling
from jaxpapers import moe

BATCH, LENGTH, D_MODEL = 16, 128, 128
ROUNDS = 10
LAYER = moe.MoEConfig(num_experts=31, k=3, d_hidden=256, routing="topk")
PATHS = {
    "dropless/blocked": dict(dispatch="dropless", grouped_matmul="blocked",
                             block_size=64),
    "dropless/ragged_dot": dict(dispatch="dropless",
                                grouped_matmul="ragged_dot"),
    "capacity 1.25": dict(dispatch="capacity", capacity_factor=1.25),
}


def _inputs():
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=(BATCH, LENGTH, D_MODEL)), jnp.float32)
  # Packed documents of about 300 tokens: most rows hold one or two.
  starts = rng.random((BATCH, LENGTH)) < 1 / 300
  return x, jnp.asarray(np.cumsum(starts, axis=1), jnp.int32)


def _functions(config):
  graphdef, params, rest = nnx.split(moe.MoE(D_MODEL, config, rngs=nnx.Rngs(0)),
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


def main():
  x, segments = _inputs()
  key = jax.random.key(1)
  print(f"MoE layer: B={BATCH} L={LENGTH} D={D_MODEL}, {LAYER.num_experts}"
        f" routed experts (hidden {LAYER.d_hidden}) + shared, k={LAYER.k};"
        " EMO pools ~ U{4..31} per document (training mode)")
  for name, overrides in PATHS.items():
    if name == "dropless/ragged_dot" and jax.default_backend() == "cpu":
      print(f"  {name}: skipped on CPU, where ragged_dot does dense work over"
            " every expert (about 10x the blocked path)")
      continue
    runs = {}
    for routing in ("topk", "emo"):
      config = dataclasses.replace(LAYER, routing=routing, **overrides)
      (params, rest), forward, backward = _functions(config)
      runs[routing] = [(fn, (params, rest, x, segments, key))
                       for fn in (forward, backward)]
    # Alternate the two sides so that load changes on a shared machine hit
    # both; keep each side's best.
    times = {routing: [float("inf")] * 2 for routing in runs}
    for _ in range(ROUNDS):
      for routing, fns in runs.items():
        for i, (fn, args) in enumerate(fns):
          times[routing][i] = min(times[routing][i],
                                  profiling.time_jitted(fn, *args, repeats=5))
    for i, label in enumerate(("forward", "forward+backward")):
      ratio = times["topk"][i] / times["emo"][i]
      print(f"  {name:20s} {label:17s}: EMO / standard throughput"
            f" {ratio:.2f}x (goal >= 0.95)  [{1e3 * times['emo'][i]:.1f} ms"
            f" vs {1e3 * times['topk'][i]:.1f} ms]")


if __name__ == "__main__":
  main()
