"""EMO: does the cost of keeping 25% of the experts fall toward 5% with training? (docs/emo.md)"""

from experiments.configs.scaling import study

# The smoke model (15 routed experts + 1 shared, k = 2) with two seeds, more documents and
# evaluation windows, and the default's warm-up fraction (5%).
STUDY_SCALE = {"seeds": (0, 1), "data.docs_per_domain": 120, "eval.max_windows": 8,
               "eval.calibration_docs": 4}

STUDIES = {
    "steps": study(
        axis="train.num_steps", what="training steps per model",
        sizes=[{"train.num_steps": n, "train.warmup_steps": n // 20, "checkpoint_every": n}
               for n in (100, 300, 900)],
        checks=["emo_barely_moves_at_25pct"], base="smoke", overrides=STUDY_SCALE),
}

DIAGNOSES = {
    "emo_barely_moves_at_25pct": dict(
        kind="reconstruction",
        evidence=(
            "The 5% bound is ours, fixed before the first run: the paper's 'about 1 point of"
            " benchmark accuracy' at 25% has no bits-per-byte counterpart, so 'barely moves' was"
            " set at a 5% relative increase of held-out bits per byte, the same 5% tolerance as"
            " 'full models about equal' (experiments/emo.py), with no further derivation. The verdict depends on our CPU geometry and training length, not on"
            " the method's direction: with the smoke geometry (15 routed experts, k = 2, d = 32;"
            " two seeds) EMO's increase stays flat at +0.07% (s.e. 0.01%), +0.39% (0.66%),"
            " +0.19% (0.38%) after 100, 300, 900 steps (slope +0.0007 per e-fold, s.e. 0.0017),"
            " and with the default geometry (31 routed experts, k = 3, d = 64) it is +0.7% after"
            " 300 steps (one seed) but +8.6% (s.e. 0.1%; +10.8% in the run before) after the"
            " default 1,500: it grows with training, away from the bound, as the standard MoE's"
            " does (+4.6% -> +40%), so"
            " more steps would not pass it. EMO stays 4-60x cheaper to prune than the standard"
            " MoE at every size."),
        artefacts=["scaling_steps/scaling_steps.png", "scaling_steps/report.md",
                   "alternative_default_300steps/report.md"]),
}
