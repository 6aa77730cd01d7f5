"""scikit-learn's bundled handwritten digits (1797 8x8 images, 10 classes).

The data ship inside the scikit-learn wheel, so nothing is downloaded.
Preprocessing is our CPU-scale substitute for the EoSS paper's image data
(``docs/eoss.md``): pixels / 16, then each feature
standardised (constant features become 0), one-hot targets, and optional
symmetric label noise that replaces a fraction of labels by uniformly random
classes (a replaced label may by chance equal the true one).
:func:`split_digits` splits the images at random into a training and a test
part (by default 2/3 and 1/3, EM-NeSy's split, ``docs/em_nesy.md``).
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


class DigitsSplit(NamedTuple):
  """A train/test split of :class:`Digits` by image (numpy arrays)."""

  train_x: np.ndarray  # (n_train, 64)
  train_labels: np.ndarray  # (n_train,)
  test_x: np.ndarray  # (n_test, 64)
  test_labels: np.ndarray  # (n_test,)
  provenance: str


def split_digits(digits: Digits, *, seed: int,
                 num_train: int | None = None) -> DigitsSplit:
  """Splits the images at random into a training and a test part.

  Args:
    digits: the data (:func:`load_digits`).
    seed: numpy seed of the permutation.
    num_train: training images, in ``[1, n - 1]``; default ``2n // 3``
      (2/3 train, 1/3 test).

  Returns:
    A :class:`DigitsSplit`: the first ``num_train`` images of a random
    permutation train, the rest test; its provenance extends the data's.

  Raises:
    TypeError: ``digits`` is not a :class:`Digits`.
    ValueError: ``seed`` is not an int >= 0, or ``num_train`` leaves a
      part empty.

  Example:
    >>> split = split_digits(load_digits(num_examples=30), seed=0)
    >>> split.train_x.shape, split.test_labels.shape
    ((20, 64), (10,))
  """
  if not isinstance(digits, Digits):
    raise TypeError(f"digits must be a Digits (load_digits); got"
                    f" {type(digits).__name__}.")
  check_int("seed", seed, 0)
  total = len(digits.labels)
  default = num_train is None
  cut = 2 * total // 3 if default else check_int("num_train", num_train, 1,
                                                 total - 1)
  order = np.random.default_rng(seed).permutation(total)
  train, test = order[:cut], order[cut:]
  how = (f"2/3 train ({cut}), 1/3 test" if default
         else f"{cut} train, {total - cut} test")
  return DigitsSplit(digits.x[train], digits.labels[train], digits.x[test],
                     digits.labels[test], digits.provenance
                     + f"; split {how} by image (seed {seed})")
