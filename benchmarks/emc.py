"""EMC cost benchmark (issue 6), printed as ratios from one run.

Per-domain adaptation cost of EMC's ``update`` (closed-form crystallisation)
against the GCAL-style generative memory and Tent, on the CSBM domain of the
experiment (n = 2000 nodes, 32 features, GCN hidden 256), at the middle of
the sequence (GCAL-style holds 4 stored memory graphs):

1. wall time of one compiled update (``time_jitted``: best of 7). Goal: EMC
   <= 0.15x GCAL-style and <= 0.15x Tent.
2. peak memory: XLA's compiled footprint of the update (arguments + outputs -
   aliased + temporaries, ``compiled.memory_analysis()``). Goal: EMC <= 0.2x.

Run: ``python -m benchmarks.emc``.
"""

import jax

from jaxpapers import profiling
from jaxpapers.graph import baselines
from jaxpapers.graph import domains
from jaxpapers.graph import emc
from jaxpapers.graph import gcn
from jaxpapers.graph import generative_memory

WARM_DOMAINS = 4


def main():
  seq = domains.csbm_sequence(num_domains=WARM_DOMAINS + 2, seed=0)
  padded = domains.PaddedDomains({0: seq}, 512)
  graphs_, source = padded.graphs[0], seq.domains[0]
  labels = padded.node_array(source.labels)
  labelled = padded.node_array(source.train_mask)
  model = gcn.fit_source(jax.random.key(0), graphs_[0], labels, labelled,
                         padded.node_array(source.val_mask),
                         num_classes=seq.num_classes).model
  methods = {
      "emc": emc.adapter(),
      "tent": baselines.tent(),
      "direct": baselines.im_adaptation(),
      "gcal": generative_memory.generative_memory(capacity=8),
  }
  target = graphs_[-1]
  cost = {}
  for name, method in methods.items():
    state = method.init(model, graphs_[0], labels, labelled, jax.random.key(1))
    for graph in graphs_[1:-1]:  # reach the middle of the sequence
      state = method.update(state, graph)
    seconds = profiling.time_jitted(method.update, state, target)
    compiled = jax.jit(method.update).lower(state, target).compile()
    cost[name] = (seconds, profiling.compiled_footprint(compiled))
    print(f"{name:7s} update: {1e3 * seconds:8.2f} ms,"
          f" peak {cost[name][1]['peak_bytes'] / 2**20:7.2f} MiB"
          f" (temporaries {cost[name][1]['temp_bytes'] / 2**20:7.2f} MiB)")
  ours_time, ours_memory = cost["emc"][0], cost["emc"][1]["peak_bytes"]
  for other in ("gcal", "tent"):
    time_ratio = ours_time / cost[other][0]
    memory_ratio = ours_memory / cost[other][1]["peak_bytes"]
    print(f"EMC / {other}: time {time_ratio:.3f}x (goal <= 0.15),"
          f" peak memory {memory_ratio:.3f}x (goal <= 0.2)")


if __name__ == "__main__":
  main()
