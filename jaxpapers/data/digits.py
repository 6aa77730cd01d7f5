"""scikit-learn's bundled handwritten digits (1797 8x8 images, 10 classes).

The data ship inside the scikit-learn wheel, so nothing is downloaded.
Preprocessing is our CPU-scale substitute for the EoSS paper's image data
(``docs/eoss.md``): pixels / 16, then each feature
standardised (constant features become 0), one-hot targets, and optional
symmetric label noise that replaces a fraction of labels by uniformly random
classes (a replaced label may by chance equal the true one).
"""

import numbers
from typing import NamedTuple

import numpy as np

from jaxpapers._checks import check_int

NUM_CLASSES = 10


class Digits(NamedTuple):
  """Arrays of the digits data set (numpy, float32 / int32)."""

  x: np.ndarray  # (n, 64) standardised pixels
  y: np.ndarray  # (n, 10) one-hot of `labels`
  labels: np.ndarray  # (n,) training labels (after noise)
  clean_labels: np.ndarray  # (n,) original labels
  provenance: str


def load_digits(
    *, num_examples: int | None = None, label_noise: float = 0.0, seed: int = 0
) -> Digits:
  """Loads, subsets, standardises and (optionally) corrupts the digits data.

  Args:
    num_examples: keep a fixed random subset of this size (None: all 1797).
    label_noise: fraction of labels replaced by a uniformly random class.
    seed: numpy seed of the subset and of the noise.

  Returns:
    A :class:`Digits` tuple.
  """
  # Checked before scikit-learn's (slow) import.
  check_int("seed", seed, 0)
  if not 0.0 <= label_noise <= 1.0:
    raise ValueError(f"label_noise must lie in [0, 1], got {label_noise}.")
  if num_examples is not None and (
      not isinstance(num_examples, numbers.Integral)
      or isinstance(num_examples, bool)):
    raise ValueError(
        f"num_examples must lie in [1, 1797] (an int), got {num_examples!r}.")
  try:
    from sklearn import datasets  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise ImportError(
        "load_digits needs scikit-learn: pip install 'jaxpapers[experiments]'."
    ) from e
  bunch = datasets.load_digits()
  x = bunch.data.astype(np.float64) / 16.0
  labels = bunch.target.astype(np.int32)
  total = x.shape[0]
  if num_examples is not None and not 1 <= num_examples <= total:
    raise ValueError(f"num_examples must lie in [1, {total}] (an int), got"
                     f" {num_examples!r}.")
  rng = np.random.default_rng(seed)
  if num_examples is not None and num_examples < total:
    keep = np.sort(rng.choice(total, num_examples, replace=False))
    x, labels = x[keep], labels[keep]
  std = x.std(axis=0)
  x = np.where(std > 0, (x - x.mean(axis=0)) / np.where(std > 0, std, 1.0), 0.0)
  noisy = labels.copy()
  flip = rng.random(labels.shape[0]) < label_noise
  noisy[flip] = rng.integers(0, NUM_CLASSES, int(flip.sum()))
  provenance = (
      f"sklearn.datasets.load_digits (scikit-learn {_sklearn_version()}):"
      f" {x.shape[0]} of {total} examples (seed {seed}), pixels/16 then"
      f" per-feature standardisation, label noise {label_noise:g}"
      f" ({int(flip.sum())} labels redrawn uniformly)"
  )
  return Digits(
      x=x.astype(np.float32),
      y=np.eye(NUM_CLASSES, dtype=np.float32)[noisy],
      labels=noisy,
      clean_labels=labels,
      provenance=provenance,
  )


def _sklearn_version() -> str:
  import sklearn  # pylint: disable=g-import-not-at-top
  return sklearn.__version__
