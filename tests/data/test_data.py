"""Mini-batch sampling and the digits data set."""

import jax
import numpy as np
import pytest

from jaxpapers import data as data_lib


def test_minibatch_indices_are_distinct_deterministic_and_in_range():
  key = jax.random.key(0)
  idx = np.asarray(data_lib.minibatch_indices(key, 50, 20))
  assert idx.shape == (20,) and len(set(idx.tolist())) == 20
  assert idx.min() >= 0 and idx.max() < 50
  np.testing.assert_array_equal(idx, data_lib.minibatch_indices(key, 50, 20))
  other = np.asarray(data_lib.minibatch_indices(jax.random.key(1), 50, 20))
  assert not np.array_equal(idx, other)


def test_full_batch_is_every_example_in_order():
  np.testing.assert_array_equal(
      data_lib.minibatch_indices(jax.random.key(0), 7, 7), np.arange(7))


def test_sample_minibatches_stacks_draws_of_rows():
  x = np.arange(30, dtype=np.float32).reshape(10, 3)
  y = np.arange(10, dtype=np.int32)
  bx, by = data_lib.sample_minibatches(jax.random.key(2), (x, y), 4, 5)
  assert bx.shape == (5, 4, 3) and by.shape == (5, 4)
  np.testing.assert_array_equal(np.asarray(bx)[..., 0] / 3, np.asarray(by))


def test_bad_batch_size_is_a_named_error():
  with pytest.raises(ValueError, match="batch_size=11 must lie in"):
    data_lib.minibatch_indices(jax.random.key(0), 10, 11)


def test_digits_preprocessing_and_label_noise():
  clean = data_lib.load_digits()
  assert clean.x.shape == (1797, 64) and clean.y.shape == (1797, 10)
  np.testing.assert_array_equal(clean.labels, clean.clean_labels)
  np.testing.assert_array_equal(clean.y.argmax(1), clean.labels)
  varying = clean.x.std(0) > 0
  np.testing.assert_allclose(clean.x[:, varying].mean(0), 0, atol=1e-5)
  np.testing.assert_allclose(clean.x[:, varying].std(0), 1, rtol=1e-4)
  assert np.all(clean.x[:, ~varying] == 0)
  noisy = data_lib.load_digits(label_noise=0.5, seed=3)
  changed = np.mean(noisy.labels != noisy.clean_labels)
  # Half the labels are redrawn, and a redrawn label keeps its class 1 time in 10.
  assert 0.40 < changed < 0.50
  assert "label noise 0.5" in noisy.provenance


def test_digits_subset_is_fixed_by_the_seed():
  a = data_lib.load_digits(num_examples=100, seed=1)
  b = data_lib.load_digits(num_examples=100, seed=1)
  np.testing.assert_array_equal(a.x, b.x)
  with pytest.raises(ValueError, match="num_examples must lie in"):
    data_lib.load_digits(num_examples=0)


def test_split_digits_partitions_the_images():
  digits = data_lib.load_digits(num_examples=30, seed=2)
  split = data_lib.split_digits(digits, seed=4)
  order = np.random.default_rng(4).permutation(30)
  np.testing.assert_array_equal(split.train_x, digits.x[order[:20]])
  np.testing.assert_array_equal(split.test_labels, digits.labels[order[20:]])
  assert split.provenance.endswith("; split 2/3 train (20), 1/3 test by image"
                                   " (seed 4)")
  other = data_lib.split_digits(digits, seed=4, num_train=25)
  assert other.train_x.shape == (25, 64) and other.test_labels.shape == (5,)
  assert "split 25 train, 5 test" in other.provenance
