"""Rollout consistency: why three checks fail at CPU scale (see docs/rollout_consistency.md)."""

from experiments.configs.scaling import study

_SETTINGS = {"datasets": ("elnino", "lorenz96"), "models": ("dlinear",),
             "unroll_ks": (), "seeds": (0, 1, 2, 3, 4),
             "lorenz96.num_samples": 5000}
_FOLLOWED = ["jvp_beats_tf_elnino_dlinear", "jvp_beats_tf_lorenz96_dlinear",
             "one_step_error_similar"]

STUDIES = {
    "steps": study(
        axis="train.num_steps", what="training steps per run",
        sizes=[{"train.num_steps": n} for n in (250, 500, 1500, 4500)],
        checks=_FOLLOWED, base="smoke",
        # The two failing DLinear settings with the default's data, lambda
        # grid and selection rule (it picks lambda = 1 at every size); 5
        # seeds; no unrolled baselines (no check followed here uses them).
        overrides={**_SETTINGS, "lams": (1e-3, 1e-2, 1e-1, 1.0)}),
    # The same with lambda fixed at 0.1 (the reconstruction alternative).
    "steps_fixed_lam": study(
        axis="train.num_steps", what="training steps per run",
        sizes=[{"train.num_steps": n} for n in (250, 500, 1500, 4500)],
        checks=_FOLLOWED, base="smoke", overrides={**_SETTINGS, "lams": (0.1,)}),
}

_RULE = ("Our lambda-selection rule (validation free-running MSE at the middle"
         " horizon, over {1e-3, 1e-2, 0.1, 1}; the paper's rule is unknown)"
         " picks lambda = 1, the grid's edge, in 8 of 8 settings.")
_ALT = ["alternative_lam0.1/report.md", "scaling_steps_fixed_lam/scaling_steps_fixed_lam.png",
        "scaling_steps_fixed_lam/report.md", "scaling_steps/scaling_steps.png",
        "scaling_steps/report.md"]
_POST_HOC = (" lambda = 0.1 was read off the committed sweep, not chosen by a"
             " held-out rule.")

DIAGNOSES = {
    "jvp_beats_tf_elnino_dlinear": dict(
        kind="reconstruction",
        evidence=(
            _RULE + " Here lambda = 1 costs 1.5x in one-step MSE and gains"
            " nothing at h=24 (paired JVP - TF +0.0004 +- 0.0077), while"
            " lambda = 0.1 in the same run gives -0.0015 +- 0.0017; rerun at the"
            " default scale with lambda fixed at 0.1 the check PASSes (-0.0013 +-"
            " 0.0016; 10/10 checks pass there). Over training steps (5 seeds,"
            " 250/500/1500/4500) lambda = 0.1 stays ahead (-0.0085, -0.0009,"
            " -0.0011, -0.0008, each 0.8-1.8 s.e.: a small gain), while"
            " the default rule's verdict flips with the lambda validation picks"
            " (PASS at 250 and at 4500 steps, where it picks 0.1; FAIL at 500 and"
            " 1500)." + _POST_HOC),
        artefacts=_ALT),
    "jvp_beats_tf_lorenz96_dlinear": dict(
        kind="reconstruction",
        evidence=(
            _RULE + " On Lorenz-96 lambda = 1 costs 3.7x in one-step MSE and loses"
            " at h=20 (+0.016 +- 0.013), while lambda = 0.1 in the same run wins"
            " (-0.0122 +- 0.0021): the linear DLinear does benefit from the"
            " penalty at a smaller weight (as on co2 and sunspots). Rerun with"
            " lambda fixed at 0.1 the check PASSes (-0.0072 +- 0.0003), and over"
            " training steps it wins at every size (-0.052, -0.008, -0.014,"
            " -0.035, all beyond 2.9 s.e.); under the default rule 4500 steps"
            " also PASS (-0.035 +- 0.012), because lambda = 1's free run diverges"
            " there (test MSE 1.4e3-7.4e3 at h=20 in all 5 seeds) and validation"
            " picks 0.1."
            + _POST_HOC),
        artefacts=_ALT),
    "one_step_error_similar": dict(
        kind="reconstruction",
        evidence=(
            "The 1.1x bound is our own reading of the abstract's 'similar"
            " one-step error' (no number is given). " + _RULE + " At lambda = 1"
            " the one-step ratios to TF are 1.00-3.69 (2 of 8 within 1.1x); at"
            " lambda = 0.1 in the same run they are 0.97-1.06 (8 of 8), and the"
            " rerun with lambda fixed at 0.1 PASSes (largest ratio 1.06, every"
            " longest-horizon check passing too). Over training steps the"
            " largest DLinear ratio at lambda = 0.1 rises slowly (1.04, 1.05,"
            " 1.06, 1.07 at 250-4500 steps; its trend reaches 1.1 near 9e4"
            " steps), while under the default rule it is 2.0-3.8 until"
            " validation switches to 0.1 at 4500 steps (1.07)." + _POST_HOC),
        artefacts=_ALT),
}
