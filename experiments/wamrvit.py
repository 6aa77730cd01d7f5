r"""WAMRViT at CPU scale: quadtree tokens vs uniform patches on moving fronts.

Per seed, four models with one backbone at (nearly) matched parameters train on 2-D advection of
sharp discs to predict the residual u_{t+1} - u_t (:mod:`jaxpapers.amr._training`): ``wamrvit``
(quadtree leaf tokens in uniform storage), ``wamrvit_native`` (native storage) and the uniform
ViTs ``vit_p4`` (finest patch) and ``vit_p8``. Free rollouts from the first test frame
(:mod:`jaxpapers.amr._rollout`; uniform storage regridding every step and with its first mesh
frozen) are scored per step by VRMSE on the field and on the region of interest, tokens and
throughput (:mod:`jaxpapers.amr._evaluation`). The checks follow the abstract's claim; what is the
paper's and what is ours: ``docs/wamrvit.md``.
"""

import functools
import itertools

from flax import nnx
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from experiments import harness
from jaxpapers import amr
from jaxpapers import data as data_lib

PAPER = {"title": "WAMRViT: quadtree-tokenized ViT surrogate with level-aware"
                  " RoPE and inference regridding",
         "authors": "anonymous (code: tonyzyl/wamrvit)",
         "url": "https://anonymous.4open.science/r/wamrvit-review-74E1"}
CLAIM = ("On uniform-grid data, the quadtree ViT matches or beats a finest-patch uniform ViT on the"
    " region of interest while using a fraction of the tokens; its uniform-storage variant pays"
    " an interpolation cost on the global metric; regridding keeps long rollouts on the moving"
    " features.")
NOT_AT_SMOKE_SCALE = ("token_fraction", "regrid_beats_frozen_mesh",
    "uniform_storage_interpolation_cost")
PAPER_RESULTS = [harness.paper_result("uniform-grid data sets", statement) for statement in (
    "WAMRViT exceeds a finest-patch uniform backbone on the region of interest while using a"
    " fraction of the tokens (abstract; no numbers available to us).",
    "uniform storage pays a structural interpolation cost on the global metric, closed at early"
    " steps by the native (multi-scale) variant (abstract).")]
NEAR_FACTOR = 1.25  # "near-finest-patch": ROI error within 25% of vit_p4
TOKEN_FRACTION = 0.75  # "a fraction of the tokens": at most 75% of vit_p4's
# The rollouts compared (the sweep's cells): variant -> (model, frozen mesh).
VARIANTS = {"wamrvit_regrid": ("wamrvit", False), "wamrvit_frozen": ("wamrvit", True),
            "wamrvit_native": ("wamrvit_native", False),
            "vit_p4": ("vit_p4", False), "vit_p8": ("vit_p8", False)}
QUADTREE_MODELS = ("wamrvit", "wamrvit_native")
VALID_VRMSE = 0.5  # a rollout step counts as on track below this global VRMSE
UNITS = {"tokens_mean": "tokens", "tokens_last": "tokens", "tokens_per_s": "tokens/s",
         "ms_per_step": "ms", "valid_steps": "steps"}
RESULT_METRICS = ("vrmse_roi_step1", "vrmse_step1", "vrmse_roi_short", "vrmse_short",
                  "vrmse_roi_mean", "vrmse_mean", "vrmse_roi_last", "vrmse_last", "valid_steps",
                  "tokens_mean", "tokens_last", "tokens_per_s", "ms_per_step")


def load_data(config) -> dict:
  """Train trajectories and meshes; test truth (new keys) and its ROI."""
  d, mesh = config.data, amr.MeshConfig(**config.tree)
  fields = data_lib.advection_dataset(
      d.seed, d.num_train + d.num_test, num_steps=d.num_steps, size=d.size,
      velocity=tuple(d.velocity), background_amplitude=d.background_amplitude)[..., None]
  train, r = fields[:d.num_train], config.rollout  # the test trajectories follow
  truth = np.asarray(fields[d.num_train:, r.start:r.start + r.num_steps + 1])
  return dict(train=train, meshes=amr.trajectory_meshes(train, mesh),
              truth=truth, roi=amr.region_of_interest(truth, mesh), mesh=mesh)


def make_model(name: str, config, seed: int):
  rngs, size, levels = nnx.Rngs(seed), config.data.size, config.tree.max_level
  sizes = dict(config.model)  # d_model, num_heads, num_layers, mlp_ratio
  if name not in QUADTREE_MODELS:
    patch = {"vit_p4": 4, "vit_p8": 8}[name]
    return amr.UniformViT(amr.uniform_vit_config(patch, 1, (size,) * 2, **sizes), patch, rngs=rngs)
  patch = (config.tree.patch,) * 2
  grid = amr.make_geometry((size, size), patch, levels).grid_shape(levels)
  backbone = amr.wamrvit_config(patch, 1, levels, grid, **sizes)
  if name == "wamrvit_native":
    return amr.NativeWAMRViT(backbone, patch, 1, levels, rngs=rngs)
  return amr.WAMRViT(backbone, rngs=rngs)


@functools.lru_cache(maxsize=None)  # one optimizer object: one compile
def make_optimizer(learning_rate, num_steps, weight_decay, clip_norm):
  return optax.chain(optax.clip_by_global_norm(clip_norm), optax.adamw(
      optax.cosine_decay_schedule(learning_rate, num_steps), weight_decay=weight_decay))


def run_variant(config, workdir, data, one: harness.Run):
  """Trains (or resumes, or restores) the variant's model; its rollout: (records, steps, size)."""
  (name, frozen), t = one.settings, config.train
  graphdef, params = nnx.split(make_model(name, config, one.seed), nnx.Param)
  tx = make_optimizer(t.learning_rate, t.num_steps, t.weight_decay, t.clip_norm)

  def chunk(state, first):  # ``log_every`` steps, then their mean loss
    end = min(first + config.log_every, t.num_steps)
    state, record = amr.train_steps(
        state, data["train"], graphdef=graphdef, tx=tx, seed=one.seed, first_step=first,
        num_steps=end - first, batch_size=t.batch_size, pushforward_steps=t.pushforward_steps,
        input_noise=t.input_noise, meshes=data["meshes"] if name in QUADTREE_MODELS else None,
        token_bucket=config.tree.token_bucket)
    return harness.Chunk(state, end, record)

  # The regridding and frozen-mesh rollouts share one trained model (a run per model and seed).
  model = nnx.merge(graphdef, workdir.train(
      f"{name}_seed{one.seed}", (params, tx.init(params)), chunk, num_steps=t.num_steps,
      checkpoint_every=config.checkpoint_every).state[0])
  records, steps = amr.evaluate_rollout(functools.partial(
      amr.model_rollout, model, jnp.asarray(data["truth"][:, 0]), config.rollout.num_steps,
      data["mesh"], frozen=frozen), data["truth"], data["roi"])
  writer = workdir.metrics(f"rollout_{one.name}")  # the per-step records, rewritten
  writer.truncate_after(-1)
  for record in records:
    writer.write(**record)
  writer.close()
  return records, steps, sum(x.size for x in jax.tree.leaves(nnx.state(model)))


def summaries(sweep):
  """``sweep.summaries``, ``finite`` only if every seed's rollout is."""
  return {v: {**s, "finite": all(p["finite"] for p in sweep.per_seed[v])}
          for v, s in sweep.summaries.items()}


def evaluate_claim(summary, short: int, sweep):
  """The claim's checks from the seed means (paired over seeds): the first ``short`` steps."""
  wamr, frozen, native, fine, coarse = (summary[v] for v in VARIANTS)
  vs = lambda a, b, key, other="": f"{a[key]:.4f} vs {other}{b[key]:.4f}"
  fraction = wamr["tokens_mean"] / fine["tokens_mean"]
  ratio = wamr["vrmse_roi_short"] / fine["vrmse_roi_short"]
  first, step1 = f"first {short} steps", "global VRMSE step 1:"
  roi_gap = sweep.paired("vrmse_roi_short", "wamrvit_regrid", "vit_p8")
  return [harness.check(*row[:4], **(row[4] if len(row) > 4 else {})) for row in [
      ("roi_near_finest_patch", f"ROI error within {NEAR_FACTOR:g}x of the finest-patch ViT"
       f" ({first})", ratio <= NEAR_FACTOR and wamr["finite"],
       f"WAMRViT {vs(wamr, fine, 'vrmse_roi_short', 'vit_p4 ')} ({ratio:.2f}x)"),
      ("roi_at_most_finest_patch", f"ROI error at most the finest-patch ViT's ({first}; paper:"
       " exceeds it)", ratio <= 1.0 and wamr["finite"],
       f"ratio {ratio:.2f}; step 1: {vs(wamr, fine, 'vrmse_roi_step1')}"),
      ("token_fraction", f"uses a fraction of the tokens (<= {TOKEN_FRACTION:.0%} of the finest"
       " patch, whole rollout)", fraction <= TOKEN_FRACTION,
       f"{wamr['tokens_mean']:.1f} vs {fine['tokens_mean']:.0f} tokens ({fraction:.0%});"
       f" {wamr['tokens_last']:.1f} at the last step", dict(measure=harness.measure(
           fraction, se=wamr["tokens_mean_se"] and wamr["tokens_mean_se"] / fine["tokens_mean"],
           bound=TOKEN_FRACTION, higher_is_better=False, label="token fraction (of vit_p4's)"))),
      ("roi_below_coarser_patch", f"ROI error below the coarser-patch ViT's ({first})",
       wamr["vrmse_roi_short"] < coarse["vrmse_roi_short"],
       vs(wamr, coarse, "vrmse_roi_short", "vit_p8 "), dict(measure=harness.measure(
           roi_gap[0], se=roi_gap[1], bound=0.0, higher_is_better=False,
           label="ROI VRMSE, WAMRViT - vit_p8 (paired)"))),
      ("regrid_beats_frozen_mesh", "regridding beats the frozen mesh on the ROI (whole rollout)",
       wamr["vrmse_roi_mean"] < frozen["vrmse_roi_mean"],
       f"{vs(wamr, frozen, 'vrmse_roi_mean', 'frozen ')};"
       f" last step {vs(wamr, frozen, 'vrmse_roi_last')}"),
      ("uniform_storage_interpolation_cost", "paper's caveat: uniform storage pays a global"
       " interpolation cost (step 1)", wamr["vrmse_step1"] > fine["vrmse_step1"],
       f"{step1} {vs(wamr, fine, 'vrmse_step1', 'vit_p4 ')}"),
      ("native_removes_interpolation_cost", "native storage removes the interpolation cost:"
       " global error below uniform storage's (step 1)",
       native["vrmse_step1"] < wamr["vrmse_step1"] and native["finite"],
       f"{step1} native {vs(native, wamr, 'vrmse_step1', 'uniform storage ')} (vit_p4"
       f" {fine['vrmse_step1']:.4f}); ROI {vs(native, wamr, 'vrmse_roi_step1')}")]]


def plot_fields(workdir, data, values):
  """F1: the true field with its mesh, and every variant (with its mesh), first seed."""
  from matplotlib.collections import LineCollection  # pylint: disable=g-import-not-at-top
  truth, mesh, examples = data["truth"][:1], data["mesh"], {v: x[0][1] for v, x in values.items()}
  steps, rows = sorted({1, truth.shape[1] // 2, truth.shape[1] - 1}), list(examples)
  with workdir.figure("fields_and_meshes", title="Field u at three rollout steps (first seed):"
                      " truth and each variant,\nwith its mesh's leaves outlined in white",
                      rows=len(rows) + 1, cols=len(steps), size=(2.4, 2.4)) as axes:
    for (r, row), (c, k) in itertools.product(enumerate(["truth"] + rows), enumerate(steps)):
      fields, trees = (truth[:1, k], amr.build_meshes(jnp.asarray(truth[:1, k]), mesh)
                       ) if r == 0 else examples[row][k - 1][::2]
      shown = axes[r, c].imshow(fields[0, ..., 0], cmap="viridis", vmin=truth.min(),
                                vmax=truth.max())
      if trees is not None:  # outline the leaves of the first tree
        leaves = np.asarray([trees.level[0], trees.i[0], trees.j[0]]).T[:int(trees.num_leaves[0])]
        boxes = [(j * w - 0.5, i * h - 0.5, w, h) for level, i, j in leaves
                 for h, w in [trees.geometry.cell_pixels(int(level))]]
        axes[r, c].add_collection(LineCollection(
            [s for x, y, w, h in boxes for s in ([(x, y), (x + w, y)], [(x, y), (x, y + h)])],
            colors="w", linewidths=0.4))
      axes[r, c].set(xticks=[], yticks=[], title=f"step {k}" if r == 0 else "",
                     xlabel="x (pixels)" if r == len(rows) else "",
                     ylabel=f"{row}\ny (pixels)" if c == 0 else "")
    axes[0, 0].figure.colorbar(shown, cax=axes[-1, -1].inset_axes([1.08, 0, 0.08, 1]),
                               label="u (field value)")


def plot_errors(workdir, values):
  """F2: VRMSE (global, ROI) and tokens vs rollout step, mean +/- s.e."""
  with workdir.figure("error_vs_step", title="VRMSE (full field, region of"
                      " interest) and tokens vs rollout step, per variant\n(mean +- s.e. over"
                      " seeds)", cols=3, size=(4.2, 3.2)) as axes:
    for ax, (key, label, scale) in zip(axes[0], (
        ("vrmse", "VRMSE, full field\n(RMSE / std of truth)", "log"),
        ("vrmse_roi", "VRMSE, region of interest\n(RMSE / std of truth)", "log"),
        ("tokens", "tokens per sample", "linear"))):
      for k, (variant, per_seed) in enumerate(values.items()):
        mean, se = harness.mean_se_curve([[r[key] for r in x[0]] for x in per_seed])
        harness.band(ax, np.arange(1, len(mean) + 1), mean, se, color=f"C{k}", label=variant)
      ax.set(xlabel="rollout step (frames)", ylabel=label, yscale=scale)


def main(config: ml_collections.ConfigDict, workdir: harness.Workdir):
  data, short = load_data(config), config.rollout.short_horizon
  grid = {v: spec for v, spec in VARIANTS.items() if spec[0] in config.models}
  sweep = workdir.sweep(grid, config.seeds, functools.partial(run_variant, config, workdir, data),
                        summarize=lambda v, _: amr.summarize_rollout(v[0], short, VALID_VRMSE))
  summary = summaries(sweep)
  num_params = {grid[v][0]: int(values[0][2]) for v, values in sweep.values.items()}
  plot_fields(workdir, data, sweep.values)
  plot_errors(workdir, sweep.values)
  c, d, m = config, config.data, config.model
  workdir.write_report(
      dataset={"name": "2-D advection of tanh-edged discs (64x64, periodic)", "provenance":
               f"generated by jaxpapers.data.advection_dataset (exact solution), data seed {d.seed}:"
               f" {d.num_train} train / {d.num_test} test trajectories of {d.num_steps} steps"},
      model={"architecture": "parallel single-stream ViT blocks (Flux-style, as in the authors'"
             f" code): D={m.d_model}, {m.num_heads} heads, {m.num_layers} layers, mlp"
             f" x{m.mlp_ratio}", "num_params": num_params, "quadtree": f"patch {c.tree.patch},"
             f" L={c.tree.max_level}, tol_frac {c.tree.tol_frac}; wamrvit: uniform storage,"
             " wamrvit_native: native storage (Shrink/Expand blocks, m = 2)", "optimizer":
             "AdamW, cosine decay, clip 1.0", "loss": "relative L2 of the next frame (residual"
             " prediction); wamrvit on leaf tokens, the others on the full field"},
      results=sweep.results(RESULT_METRICS, higher_is_better=("tokens_per_s", "valid_steps")),
      checks=evaluate_claim(summary, short, sweep) if len(grid) == len(VARIANTS) else [],
      extra_run_data={"summary": summary}, notes=[
          f"{len(c.seeds)} seeds (model init and batch order); errors are means over"
          f" {d.num_test} test trajectories, rollouts of {c.rollout.num_steps} steps from test"
          f" frame {c.rollout.start}.", "ROI = pixels under finest leaves of the mesh built from"
          " the true field at each step (our definition; docs/wamrvit.md).",
          f"valid_steps = leading rollout steps with global VRMSE < {VALID_VRMSE}: " + ", ".join(
              f"{v} {s['valid_steps']:.1f}" for v, s in summary.items()) + ".",
          "tokens_per_s and ms_per_step are wall-clock on a shared CPU: compare within this run"
          " only; ms_per_step includes regridding.", f"parameters: {num_params}"] + [
          f"{v}: non-finite values in the rollout" for v, s in summary.items() if not s["finite"]])


if __name__ == "__main__":
  harness.run(main, name="wamrvit")
