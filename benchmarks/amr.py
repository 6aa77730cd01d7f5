"""Quadtree tokenizer throughput (WAMRViT issue), printed as ratios from one run.

Builds the balanced quadtree of each field and gathers its uniform-storage
leaf tokens, for a batch of advection frames:

1. jit-compiled and vmapped over the batch (``amr.build_quadtree`` +
   ``amr.tokenize``), vs
2. the Python reference that the tests compare against
   (``jaxpapers.amr._reference``: leaf objects, split-until-balanced, Morton
   keys bit by bit), one field at a time.

Goal: >= 50x fields per second. Also printed: the jitted call without
``vmap`` (a loop of single-field calls) and the vmapped regrid, for scale.

Run: ``python -m benchmarks.amr`` (``--tiny``: one 16 x 16 case, batch 4,
one timing repeat).
"""

import functools
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import benchmarks
from jaxpapers import profiling
from jaxpapers import amr
from jaxpapers.amr import _reference as reference  # the slow Python reference
from jaxpapers import data as data_lib

TOL_FRAC = 0.02


class Sizes(NamedTuple):
  # (field size, patch, max_level, batch) of each case
  cases: tuple[tuple[int, int, int, int], ...]
  reference_fields: int  # the reference is slow; time a few fields
  looped_fields: int
  repeats: int


FULL = Sizes(cases=((64, 4, 2, 64), (256, 4, 4, 16)), reference_fields=4,
             looped_fields=8, repeats=7)
TINY = Sizes(cases=((16, 4, 1, 4),), reference_fields=2, looped_fields=2,
             repeats=1)


def _fields(size, batch):
  frames = data_lib.advection_dataset(0, batch, num_steps=0, size=size,
                                      radius_range=(size / 12, size / 6))
  return frames[:, 0]


def _reference_seconds_per_field(fields, patch, max_level, repeats):
  """Best of ``repeats`` passes over a few fields (as ``time_jitted`` does)."""
  fields = np.asarray(fields)
  geometry = amr.make_geometry(fields.shape[1:], patch, max_level)
  best = float("inf")
  for _ in range(repeats):
    start = time.perf_counter()
    for field in fields:
      leaves = reference.build_quadtree_reference(
          field, patch=patch, tol_frac=TOL_FRAC, max_level=max_level)
      reference.tokenize_reference(field, leaves, geometry)
    best = min(best, (time.perf_counter() - start) / len(fields))
  return best


def main(tiny: bool = False):
  sizes = TINY if tiny else FULL
  few = min(sizes.repeats, 3)
  for size, patch, max_level, batch in sizes.cases:
    fields = _fields(size, batch)
    budget = amr.make_geometry((size, size), patch, max_level).num_finest_cells
    build = functools.partial(amr.build_quadtree, patch=patch,
                              tol_frac=TOL_FRAC, max_level=max_level,
                              max_tokens=budget)

    def tokenize_one(field, build=build):
      tree = build(field)
      return amr.tokenize(field, tree), tree

    batched = jax.jit(jax.vmap(tokenize_one))
    single = jax.jit(tokenize_one)
    vmapped_s = profiling.time_jitted(batched, fields,
                                      repeats=sizes.repeats) / batch
    looped = sizes.looped_fields
    looped_s = profiling.time_jitted(
        lambda f: [single(x) for x in f], list(fields[:looped]),
        repeats=few) / looped
    reference_s = _reference_seconds_per_field(
        fields[:sizes.reference_fields], patch, max_level, few)
    tokens, trees = batched(fields)
    leaves = float(jnp.mean(trees.num_leaves))
    regrid = jax.jit(jax.vmap(functools.partial(amr.regrid, tol_frac=TOL_FRAC)))
    regrid_s = profiling.time_jitted(regrid, tokens, trees,
                                     repeats=few) / batch
    print(f"{size}x{size}, patch {patch}, L={max_level}: {leaves:.0f} leaves of"
          f" {budget} on average")
    print(f"  jit+vmap (batch {batch}): {1e6 * vmapped_s:9.1f} us/field")
    print(f"  jit, one field per call: {1e6 * looped_s:9.1f} us/field")
    print(f"  Python reference:        {1e6 * reference_s:9.1f} us/field")
    print(f"  speed-up jit+vmap / reference: {reference_s / vmapped_s:,.1f}x"
          " (goal >= 50x)")
    print(f"  regrid, jit+vmap:        {1e6 * regrid_s:9.1f} us/field")


if __name__ == "__main__":
  benchmarks.cli(main)
