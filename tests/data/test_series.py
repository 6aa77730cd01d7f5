"""Bundled and generated series, chronological splits and windows."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate

from jaxpapers import data as data_lib


@pytest.mark.parametrize("name,shape", [
    ("co2", (2284, 1)), ("sunspots", (309, 1)), ("elnino", (732, 1)),
    ("macrodata", (202, 7)),
])
def test_statsmodels_series_load_offline_with_provenance(name, shape):
  series = data_lib.load_series(name)
  assert series.values.shape == shape and series.values.dtype == np.float32
  assert np.all(np.isfinite(series.values))
  assert len(series.channels) == shape[1]
  assert f"statsmodels.datasets.{name}" in series.provenance


def test_series_preprocessing_matches_the_raw_tables():
  from statsmodels import datasets  # pylint: disable=g-import-not-at-top
  co2 = datasets.co2.load_pandas().data["co2"]
  filled = co2.interpolate(method="linear").to_numpy()
  np.testing.assert_allclose(data_lib.load_series("co2").values[:, 0], filled,
                             rtol=1e-6)
  table = datasets.elnino.load_pandas().data
  elnino = data_lib.load_series("elnino").values[:, 0]
  np.testing.assert_allclose(elnino[12:24], table.iloc[1, 1:13], rtol=1e-6)
  macro = datasets.macrodata.load_pandas().data
  np.testing.assert_allclose(
      data_lib.load_series("macrodata").values[:, 2],
      np.diff(np.log(macro["realinv"].to_numpy())), rtol=1e-5)


def test_unknown_series_is_a_named_error():
  with pytest.raises(ValueError, match="name must be one of"):
    data_lib.load_series("airline")


def test_lorenz96_rk4_matches_scipy_and_keeps_its_equilibrium():
  from jaxpapers.data import _series as series  # pylint: disable=g-import-not-at-top
  x0 = 8.0 + 0.5 * np.sin(np.arange(6.0))
  ours = series.lorenz96_trajectory(jnp.asarray(x0, jnp.float32), 8.0, 0.01,
                                    num_samples=5, observe_every=10)
  rhs = lambda t, x: (np.roll(x, -1) - np.roll(x, 2)) * np.roll(x, 1) - x + 8.0
  ref = integrate.solve_ivp(rhs, (0, 0.5), x0, t_eval=np.linspace(0.1, 0.5, 5),
                            rtol=1e-10, atol=1e-10, method="DOP853")
  # float32 roundoff, amplified by the chaos, dominates RK4's O(dt^4) error.
  np.testing.assert_allclose(ours, ref.y.T, atol=1e-3)
  still = series.lorenz96_trajectory(jnp.full(6, 8.0, jnp.float32), 8.0, 0.01,
                                     num_samples=3, observe_every=5)
  np.testing.assert_array_equal(still, np.full((3, 6), 8.0))


def test_lorenz96_climatology_and_seed_determinism():
  """F = 8 attractor: mean about 2.3 and std about 3.6 per variable."""
  a = data_lib.lorenz96(num_samples=2000, seed=0)
  assert a.values.shape == (2000, 8)
  assert 2.0 < a.values.mean() < 2.7 and 3.3 < a.values.std() < 4.0
  np.testing.assert_array_equal(a.values, data_lib.lorenz96(num_samples=2000).values)
  b = data_lib.lorenz96(num_samples=2000, seed=1)
  assert np.abs(a.values - b.values).max() > 1.0
  assert "N=8, F=8" in a.provenance and "seed 0" in a.provenance


def test_chronological_split_normalises_with_training_statistics_only():
  values = np.concatenate([np.arange(100.0)[:, None],
                           np.cos(np.arange(100.0))[:, None]], axis=1)
  split = data_lib.chronological_split(values)
  assert (split.train_end, split.val_end) == (70, 80)
  assert split.segment("test") == (80, 100)
  train = split.values[:70]
  np.testing.assert_allclose(train.mean(0), 0, atol=1e-5)
  np.testing.assert_allclose(train.std(0), 1, rtol=1e-5)
  # Later rows use the same affine map: the trend runs past the training range.
  np.testing.assert_allclose(split.values[:, 0] * split.std[0] + split.mean[0],
                             values[:, 0], rtol=1e-5, atol=1e-4)
  assert split.values[99, 0] > train[:, 0].max()


@pytest.mark.parametrize("values,fractions,match", [
    (np.ones((10, 1)), (0.7, 0.1, 0.2), "constant over the training"),
    (np.arange(10.0)[:, None], (0.7, 0.2, 0.2), "summing to 1"),
    (np.arange(10.0), (0.7, 0.1, 0.2), r"must be \(T, C\)"),
    (np.full((10, 1), np.nan), (0.7, 0.1, 0.2), "NaN or inf"),
])
def test_bad_split_inputs_are_named_errors(values, fractions, match):
  with pytest.raises(ValueError, match=match):
    data_lib.chronological_split(values, fractions)


def test_sliding_windows_never_let_the_truth_cross_the_segment_end():
  values = np.arange(40.0).reshape(20, 2)
  contexts, truths = data_lib.sliding_windows(values, 3, 4, start=10, stop=18)
  # First truth rows 10..14: truth ends by row 17, context reaches back.
  assert contexts.shape == (5, 3, 2) and truths.shape == (5, 4, 2)
  np.testing.assert_array_equal(contexts[0], values[7:10])
  np.testing.assert_array_equal(truths[-1], values[14:18])
  contexts, _ = data_lib.sliding_windows(values, 3, 1, stride=4)
  np.testing.assert_array_equal(contexts[:, 0, 0], values[[0, 4, 8, 12, 16], 0])
  with pytest.raises(ValueError, match="no window fits"):
    data_lib.sliding_windows(values, 3, 9, start=10, stop=18)


def test_split_windows_keep_each_truth_inside_its_segment():
  split = data_lib.chronological_split(np.cumsum(np.ones((100, 1)), axis=0))
  contexts, truths = split.windows("val", 5, 3)
  # Validation truths start at row 70 and end by row 79; contexts reach back.
  assert truths.shape == (8, 3, 1)
  np.testing.assert_array_equal(contexts[0], split.values[65:70])
  np.testing.assert_array_equal(truths[-1], split.values[77:80])
  _, test_truths = split.windows("test", 5, 4, stride=2)
  np.testing.assert_array_equal(test_truths[:, 0, 0],
                                split.values[80:97:2, 0])
  with pytest.raises(ValueError, match="segment must be one of"):
    split.windows("holdout", 5, 3)
