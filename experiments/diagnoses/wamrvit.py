r"""WAMRViT: why the token fraction and the ROI error vs the patch-8 ViT fail (docs/wamrvit.md).

The studies run the binary at smoke-scale models (D = 32, one layer, 4 training trajectories,
2 seeds) rolled out 10 steps, the default's accuracy horizon, so that each stays within a few
CPU minutes. ``python -m experiments.diagnoses.wamrvit`` adds a model-free check of the mesh
itself (:func:`oracle_regrid`): the regridding rollout fed the true next frame plus Gaussian
noise of a given size in place of a model's prediction, on the default's test trajectories;
it writes ``experiments/results/wamrvit/oracle_regrid/`` (about a minute on 2 cores).
"""

import json
import os

from experiments.configs.scaling import study

SHORT = {"data.num_steps": 10, "rollout.num_steps": 10, "rollout.short_horizon": 10,
         "checkpoint_every": 40, "log_every": 40}

STUDIES = {
    "train_steps": study(
        axis="train.num_steps", what="training steps per model",
        sizes=[{"train.num_steps": n} for n in (40, 120, 360)],
        checks=["token_fraction", "roi_below_coarser_patch"], base="smoke", overrides=SHORT),
}

DIAGNOSES = {
    "token_fraction": dict(
        kind="scale",
        evidence=(
            "The regridding refines wherever the model's predicted next frame differs from a"
            " smooth field by more than the tolerance, and a refined cell coarsens back only below"
            " 0.25 x 0.02 = 0.5% of the field's range, so the token count follows the models'"
            " rollout error, not the data: fed the true next frame, the same regridding keeps 58%"
            " of the finest patch's tokens over the 30-step rollout (the true field's own meshes"
            " 52%), 71% with per-step noise of 0.1% of the range, 77% at 0.2% and 97% at 0.5%"
            " (oracle_regrid); the default's models err by about 0.35% of the range already at"
            " step 1 (global VRMSE 0.0152 x std/range 0.23) and lose the fronts by step 6, giving"
            " 95%. With training the fraction falls toward the bound: 0.900 +- 0.004, 0.875 +-"
            " 0.023, 0.861 +- 0.020 at 40, 120, 360 steps (smoke-size models, 2 seeds, 10-step"
            " rollouts; slope -0.018 +- 0.008 per e-fold), a trend that reaches 0.75 only at"
            " about 1.5e5 steps, 50x the protocol's 3000. The 75% bound is ours: the abstract"
            " says only 'a fraction of the tokens', and 75% asks for a quarter fewer tokens"
            " (about 56% of the attention cost). At 128x128, with the same disc sizes, the"
            " true-field regridding keeps 24% and stays at 34% up to 0.2% noise."),
        artefacts=["scaling_train_steps/scaling_train_steps.png", "scaling_train_steps/report.md",
                   "oracle_regrid/oracle_regrid.png", "oracle_regrid/oracle_regrid.json"]),
    "roi_below_coarser_patch": dict(
        kind="method",
        evidence=(
            "WAMRViT is the more accurate model on the region of interest after one step (default"
            " run: ROI VRMSE 0.0231 vs the patch-8 ViT's 0.0445) but its rollout error grows"
            " faster, and the check averages the first 10 steps, where every model has lost the"
            " fronts from about step 6 on (0.6737 vs 0.4840; 0.6716 vs 0.4829 in the run before). More training moves the gap away"
            " from the claim: WAMRViT minus vit_p8 (paired over 2 seeds) +0.116 +- 0.028, +0.163"
            " +- 0.045, +0.181 +- 0.003 at 40, 120, 360 steps (slope +0.028 +- 0.012 per e-fold),"
            " and +0.19 at the default's 600 steps with a 4-layer model. The claim does not hold"
            " in this setting. The comparison with the coarser patch, its 10-step horizon and the"
            " ROI definition are ours: the paper's claim is against the finest-patch ViT, which"
            " WAMRViT matches (roi_near_finest_patch and roi_at_most_finest_patch pass)."),
        artefacts=["scaling_train_steps/scaling_train_steps.png",
                   "scaling_train_steps/report.md"]),
}

NOISES = (0.0, 0.001, 0.002, 0.005, 0.01)  # prediction error, a fraction of the field's range
ORACLE_SETTINGS = {"size 64 (default)": {}, "size 128": {"size": 128},
                   "tol_frac 0.05": {"tol_frac": 0.05}, "coarsen_ratio 1": {"coarsen_ratio": 1.0}}


def oracle_regrid(noise: float, size: int = 64, tol_frac: float = 0.02,
                  coarsen_ratio: float = 0.25, steps: int = 30) -> dict:
  """Token fractions of a regridding rollout whose "model" returns the truth + noise.

  The default's data (seed 1234, the 8 test trajectories after the 32 training ones, 30 steps
  from test frame 0); each step's predicted tokens are the true next frame's tokens on the
  current mesh plus i.i.d. Gaussian noise of s.d. ``noise`` times the frame's range (fresh each
  step, so errors do not compound). Returns the whole-rollout mean and last-step token counts
  as fractions of the finest patch's, and the fraction of the true field's own meshes.
  """
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  from jaxpapers import amr  # pylint: disable=g-import-not-at-top
  from jaxpapers import data as data_lib  # pylint: disable=g-import-not-at-top
  truth = data_lib.advection_dataset(1234, 40, num_steps=40, size=size)[32:, :steps + 1, ..., None]
  mesh = amr.MeshConfig(patch=4, max_level=2, tol_frac=tol_frac, coarsen_ratio=coarsen_ratio,
                        max_passes=10, token_bucket=32)
  step, key = [0], jax.random.key(0)

  def advance(_, trees):
    step[0] += 1
    tokens = jax.vmap(amr.tokenize)(truth[:, step[0]], trees)
    scale = noise * jnp.ptp(truth[:, step[0]])
    return tokens + scale * jax.random.normal(jax.random.fold_in(key, step[0]), tokens.shape)

  counts = [np.mean(s.num_tokens) for s in amr.quadtree_rollout(advance, truth[:, 0], steps, mesh)]
  # num_tokens is what the model read: the mesh after the last regrid is one step further.
  finest = (size // 4) ** 2
  true = [np.mean(amr.build_meshes(truth[:, k], mesh).num_leaves) for k in range(steps)]
  return {"noise": noise, "size": size, "tol_frac": tol_frac, "coarsen_ratio": coarsen_ratio,
          "fraction_mean": float(np.mean(counts) / finest),
          "fraction_last": float(counts[-1] / finest),
          "true_mesh_fraction": float(np.mean(true) / finest)}


def main(out: str = "experiments/results/wamrvit/oracle_regrid"):
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  rows = {name: [oracle_regrid(n, **kw) for n in NOISES] for name, kw in ORACLE_SETTINGS.items()}
  os.makedirs(out, exist_ok=True)
  with open(os.path.join(out, "oracle_regrid.json"), "w") as f:
    json.dump(rows, f, indent=1)
  fig, ax = plt.subplots(figsize=(5.5, 3.6))
  x = range(len(NOISES))
  for name, r in rows.items():
    ax.plot(x, [p["fraction_mean"] for p in r], "o-", label=name)
  ax.axhline(0.75, color="k", ls=":", label="check bound (0.75, ours)")
  ax.set_xticks(x, [f"{n:g}" for n in NOISES])
  ax.set(xlabel="prediction noise per step (s.d. / field range)", ylim=(0, 1.05),
         ylabel="tokens / finest patch's\n(mean over a 30-step rollout)")
  ax.set_title("Regridding from the true field keeps a fraction of the tokens;\n"
               "noise of 0.2-0.5% of the range refines everything", fontsize=9)
  ax.legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(os.path.join(out, "oracle_regrid.png"), dpi=120)
  for name, r in rows.items():
    print(name, " ".join(f"{p['noise']:g}:{p['fraction_mean']:.3f}/{p['fraction_last']:.3f}"
                         for p in r), f"true mesh {r[0]['true_mesh_fraction']:.3f}")


if __name__ == "__main__":
  main()
