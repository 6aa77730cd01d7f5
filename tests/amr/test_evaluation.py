"""Rollout evaluation: VRMSE, the region of interest, stage timing, records, model dispatch."""

import functools

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import amr

SIZE, PATCH, LEVELS = 32, 4, 2
SIZES = dict(d_model=16, num_heads=1, num_layers=1, mlp_ratio=2)
MESH = amr.MeshConfig(PATCH, LEVELS, tol_frac=0.05, token_bucket=16)
SHIFT = (2, 1)  # pixels per step of the exact-transport "model"


def _disc_trajectories(centres, num_frames):
  """``(B, K, H, W, 1)`` discs moving by ``SHIFT`` pixels per frame."""
  y, x = np.mgrid[:SIZE, :SIZE].astype(np.float32)
  first = np.stack([np.tanh((6.0 - np.hypot(y - cy, x - cx)) / 1.5)
                    for cy, cx in centres])[..., None]
  return np.stack([np.roll(first, (k * SHIFT[0], k * SHIFT[1]), axis=(1, 2))
                   for k in range(num_frames)], axis=1)


def _with_weights(model):
  kernel = model.backbone.decode.kernel  # starts at zero: give it weights
  kernel[...] = 0.05 * jax.random.normal(jax.random.key(7), kernel.shape)
  return model


def test_vrmse_closed_form():
  true = np.stack([np.linspace(-1, 1, 16).reshape(4, 4, 1)] * 2)
  pred = true + np.array([0.1, 0.2]).reshape(2, 1, 1, 1)
  std = np.std(true[0])
  np.testing.assert_allclose(amr.vrmse(pred, true), [0.1 / std, 0.2 / std])
  mask = np.zeros((2, 4, 4), bool)
  mask[:, 0, 0] = True
  pred[:, 0, 0] += 1.0
  np.testing.assert_allclose(amr.vrmse(pred, true, mask),
                             [1.1 / std, 1.2 / std])
  np.testing.assert_array_equal(amr.vrmse(pred, true, mask & False), [0, 0])


def test_region_of_interest_is_the_finest_pixels_of_each_true_frame():
  truth = _disc_trajectories([(10, 9), (20, 22)], 3)
  roi = amr.region_of_interest(truth, MESH)
  assert roi.shape == (2, 3, SIZE, SIZE) and roi.dtype == bool
  for k in range(3):
    expected = jax.vmap(amr.finest_pixels)(
        amr.build_meshes(jnp.asarray(truth[:, k]), MESH))
    np.testing.assert_array_equal(roi[:, k], expected)
  # The region follows the moving disc and covers only part of the domain.
  assert not np.array_equal(roi[:, 0], roi[:, 2])
  assert 0 < roi.mean() < 0.75


def test_stage_timer_compiles_outside_the_timing_once_per_shape():
  calls = []

  def fn(x):
    calls.append(x.shape)
    return x + 1

  timer = amr.StageTimer()
  out = timer("model", fn, jnp.zeros(3))
  np.testing.assert_array_equal(out, np.ones(3))
  timer("model", fn, jnp.zeros(3))
  assert calls == [(3,)] * 3  # warm-up + timed, then timed only
  timer("model", fn, jnp.zeros(4))  # a new bucket shape warms up again
  assert calls[3:] == [(4,)] * 2
  assert timer.seconds["model"] > 0 and "regrid" not in timer.seconds


def test_evaluate_rollout_scores_each_step_against_its_true_frame():
  truth = _disc_trajectories([(10, 9), (20, 22)], 4)
  roi = amr.region_of_interest(truth, MESH)
  move = lambda u: jnp.roll(u, SHIFT, axis=(1, 2))  # the exact solution
  exact = functools.partial(amr.uniform_rollout, move,
                            jnp.asarray(truth[:, 0]), 3, PATCH)
  records, steps = amr.evaluate_rollout(exact, truth, roi)
  assert [r["step"] for r in records] == [1, 2, 3]
  for record in records:
    assert record["vrmse"] == record["vrmse_roi"] == 0.0
    assert record["tokens"] == (SIZE // PATCH) ** 2 and record["finite"]
    assert record["tokens_per_s"] > 0 and record["ms_per_step"] > 0
  assert isinstance(steps[-1].fields, np.ndarray)
  np.testing.assert_array_equal(steps[-1].fields, truth[:, 3])
  # A rollout that stands still falls behind: its error grows step by step.
  still = functools.partial(amr.uniform_rollout, lambda u: u + 0.0,
                            jnp.asarray(truth[:, 0]), 3, PATCH)
  errors = [r["vrmse_roi"] for r in amr.evaluate_rollout(still, truth, roi)[0]]
  assert 0 < errors[0] < errors[1] < errors[2]


def test_summary_counts_the_leading_steps_on_track():
  records = [{"vrmse": v, "vrmse_roi": 2 * v, "tokens": 100.0 + k,
              "tokens_per_s": 1.0, "ms_per_step": 1.0, "finite": True}
             for k, v in enumerate([0.1, 0.3, 0.6, 0.2])]
  summary = amr.summarize_rollout(records, short_steps=2, valid_vrmse=0.5)
  assert summary["valid_steps"] == 2
  assert summary["vrmse_roi_short"] == pytest.approx(0.4)
  assert summary["vrmse_roi_step1"] == 0.2
  assert summary["vrmse_mean"] == pytest.approx(0.3)
  assert summary["vrmse_last"] == 0.2 and summary["tokens_last"] == 103.0
  assert summary["finite"] is True
  records[2]["vrmse"] = 0.4
  assert amr.summarize_rollout(records, 2, 0.5)["valid_steps"] == 4
  records[1]["finite"] = False
  assert amr.summarize_rollout(records, 2, 0.5)["finite"] is False


@pytest.mark.slow  # compile-bound (20-40 s on 2 cores); CI runs -m slow
def test_model_rollout_runs_the_rollout_of_each_model():
  fields = jnp.asarray(_disc_trajectories([(10, 9)], 1)[:, 0])
  vit = _with_weights(amr.UniformViT(
      amr.uniform_vit_config(PATCH, 1, (SIZE, SIZE), **SIZES), PATCH,
      rngs=nnx.Rngs(0)))
  config = amr.wamrvit_config((PATCH, PATCH), 1, LEVELS, (8, 8), **SIZES)
  wamr = _with_weights(amr.WAMRViT(config, rngs=nnx.Rngs(0)))
  native = amr.NativeWAMRViT(config, (PATCH, PATCH), 1, LEVELS,
                             rngs=nnx.Rngs(0))
  step = functools.partial(amr.residual_step, vit)
  got = list(amr.model_rollout(vit, fields, 2))
  expected = list(amr.uniform_rollout(step, fields, 2, PATCH))
  assert got[-1].trees is None
  np.testing.assert_allclose(got[-1].fields, expected[-1].fields, atol=1e-6)
  assert np.abs(np.asarray(got[-1].fields - fields)).max() > 1e-3
  for frozen in (False, True):
    got = list(amr.model_rollout(wamr, fields, 2, MESH, frozen=frozen))
    expected = list(amr.quadtree_rollout(
        functools.partial(amr.residual_step, wamr), fields, 2, MESH,
        frozen=frozen))
    np.testing.assert_allclose(got[-1].fields, expected[-1].fields, atol=1e-6)
    np.testing.assert_array_equal(got[-1].trees.level,
                                  expected[-1].trees.level)
  got = list(amr.model_rollout(native, fields, 2, MESH))
  assert got[-1].trees is not None  # native storage regrids too
  for model in (vit, native):
    with pytest.raises(ValueError, match="frozen meshes need a WAMRViT"):
      amr.model_rollout(model, fields, 2, MESH, frozen=True)


def test_uniform_rollout_errors_name_the_argument():
  fields = jnp.zeros((1, 30, 30, 1))
  with pytest.raises(ValueError, match="multiple of the patch 4"):
    amr.uniform_rollout(lambda u: u, fields, 2, 4)
  with pytest.raises(ValueError, match="num_steps"):
    amr.uniform_rollout(lambda u: u, jnp.zeros((1, 32, 32, 1)), 0, 4)
  with pytest.raises(TypeError, match="advance"):
    amr.uniform_rollout("model", jnp.zeros((1, 32, 32, 1)), 2, 4)
