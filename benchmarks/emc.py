"""EMC cost benchmark (issue 6), printed as ratios from one run.

Per-domain adaptation cost of EMC's ``update`` (closed-form crystallisation)
against the GCAL-style generative memory and Tent, on the CSBM domain of the
experiment (n = 2000 nodes, 32 features, GCN hidden 256), at the middle of
the sequence (GCAL-style holds 4 stored memory graphs):

1. wall time of one compiled update (``time_jitted``: best of 7). Goal: EMC
   <= 0.15x GCAL-style and <= 0.15x Tent.
2. peak memory: XLA's compiled footprint of the update (arguments + outputs -
   aliased + temporaries, ``compiled.memory_analysis()``). Goal: EMC <= 0.2x.

Run: ``python -m benchmarks.emc`` (``--tiny``: 128 nodes, GCN hidden 16
trained 2 epochs, one warm domain, one repeat).
"""

from typing import NamedTuple

import jax

import benchmarks
from jaxpapers import profiling
from jaxpapers import graph


class Sizes(NamedTuple):
  num_nodes: int
  pad_multiple: int
  hidden: int
  source_epochs: int
  warm_domains: int  # targets adapted to before the timed one
  repeats: int


FULL = Sizes(num_nodes=2000, pad_multiple=512, hidden=256, source_epochs=100,
             warm_domains=4, repeats=7)
TINY = Sizes(num_nodes=128, pad_multiple=64, hidden=16, source_epochs=2,
             warm_domains=1, repeats=1)


def main(tiny: bool = False):
  sizes = TINY if tiny else FULL
  seq = graph.csbm_sequence(num_domains=sizes.warm_domains + 2,
                              num_nodes=sizes.num_nodes, seed=0)
  padded = graph.PaddedDomains({0: seq}, sizes.pad_multiple)
  graphs_, source = padded.graphs[0], seq.domains[0]
  labels = padded.node_array(source.labels)
  labelled = padded.node_array(source.train_mask)
  model = graph.fit_source(jax.random.key(0), graphs_[0], labels, labelled,
                         padded.node_array(source.val_mask),
                         num_classes=seq.num_classes, hidden=sizes.hidden,
                         epochs=sizes.source_epochs).model
  methods = {
      "emc": graph.emc_adapter(),
      "tent": graph.tent(),
      "direct": graph.im_adaptation(),
      "gcal": graph.generative_memory(capacity=8),
  }
  target = graphs_[-1]
  cost = {}
  for name, method in methods.items():
    # One compiled update per method serves the warm-up, the timing and the
    # footprint (the padded domains share one shape).
    compile_update = profiling.CompiledCache()
    state = method.init(model, graphs_[0], labels, labelled, jax.random.key(1))
    for domain_graph in graphs_[1:-1]:  # reach the middle of the sequence
      state = compile_update(method.update, state, domain_graph)[0](state, domain_graph)
    update, footprint = compile_update(method.update, state, target)
    seconds = profiling.time_jitted(update, state, target,
                                    repeats=sizes.repeats)
    cost[name] = (seconds, footprint)
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
  benchmarks.cli(main)
