"""Experiment binaries (absl + ml_collections) that reproduce each paper's claim.

Run one from a checkout as ``python -m experiments.<name> --config
experiments/configs/<name>.py``. All binaries share :mod:`experiments.harness`.
They need the ``experiments`` extra (``pip install -e ".[experiments]"``); without
it, importing this package fails at once and names the extra, before any work.
"""

import importlib.util

# Import name -> distribution of every package of the `experiments` extra
# (setup.cfg); keep the two lists together.
_EXPERIMENTS_EXTRA = {
    "absl": "absl-py",
    "ml_collections": "ml-collections",
    "orbax": "orbax-checkpoint",
    "matplotlib": "matplotlib",
    "tensorboardX": "tensorboardX",
    "sklearn": "scikit-learn",
    "statsmodels": "statsmodels",
    "ot": "POT",
    "elkai": "elkai",
}


def _missing_distributions() -> list[str]:
  # find_spec looks the package up without importing it: the check costs
  # milliseconds, where importing the whole extra would cost seconds.
  return [dist for module, dist in _EXPERIMENTS_EXTRA.items()
          if importlib.util.find_spec(module) is None]


_missing = _missing_distributions()
if _missing:
  raise ImportError(
      "The experiment binaries need the 'experiments' extra of jaxpapers, and "
      f"{', '.join(_missing)} {'is' if len(_missing) == 1 else 'are'} not "
      "installed. From the checkout: pip install -e \".[experiments]\"")
