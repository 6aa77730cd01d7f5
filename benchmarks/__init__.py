"""Speed benchmarks: ratios against a baseline run side by side in one process.

Run one with ``python -m benchmarks.<name>``; add ``--tiny`` to run the same
code path at the smallest sizes, with one or two timing rounds, in a few
seconds (a check that the benchmark still runs; its ratios mean nothing).

Every module follows the same pattern:

* ``Sizes``: a NamedTuple of everything the benchmark scales (problem sizes,
  timing rounds and repeats), with two instances: ``FULL`` (the measurement
  its docstring describes) and ``TINY``;
* ``main(tiny: bool = False)``: runs the benchmark at ``TINY`` or ``FULL``
  and prints its lines, each ratio as a number followed by ``x``
  (e.g. ``1.05x``);
* ``if __name__ == "__main__": benchmarks.cli(main)``, which reads
  ``--tiny``.

``tests/test_benchmarks.py`` runs every module's ``main(tiny=True)`` in the
slow suite (``pytest -m slow tests/test_benchmarks.py``) and checks that it
printed at least one ratio, every ratio finite, so a benchmark whose code no
longer runs fails CI; a new module is picked up by itself and must follow
the pattern. Keep ``TINY`` to a few seconds: the slow suite's budget is
tight.
"""

import argparse
import sys
from typing import Callable


def cli(main: Callable[..., None]) -> None:
  """Parses the command line (``--tiny``) and calls ``main(tiny=...)``."""
  module = sys.modules[main.__module__]
  spec = getattr(module, "__spec__", None)  # None when run as a file path
  parser = argparse.ArgumentParser(
      prog=f"python -m {spec.name}" if spec else None,
      description=module.__doc__,
      formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument(
      "--tiny", action="store_true",
      help="the same code path at the smallest sizes, 1-2 timing rounds:"
           " checks that the benchmark runs; its numbers mean nothing")
  main(tiny=parser.parse_args().tiny)
