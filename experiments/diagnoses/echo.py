"""ECHO: why the claim's checks do not pass at CPU scale (see docs/echo.md)."""

from experiments.configs.scaling import study

CHECKS = [f"{v}_{c}" for v in ("echo_0.005", "echo_0.05", "world_model_only")
          for c in ("raises_pass_at_1", "lowers_env_ce")]
CHECKS.append("echo_0.05_reaches_grpo_peak_sooner")

# The default's model, warm start and variants at a third of its RL cost per
# step (2 seeds, 2 tasks x 8 samples per step): the RL budget is what we cut
# most against the paper's CPU protocol (300 steps of 8 x 8 rollouts).
CHEAP = {"seeds": (0, 1), "rl.tasks_per_step": 2, "warm_start.batch_size": 16,
         "env.num_train_tasks": 500, "eval.every": 5}

STUDIES = {
    "rl_steps": study(
        axis="rl.steps", what="RL steps",
        sizes=[{"rl.steps": s} for s in (10, 20, 40)],
        checks=CHECKS, base="", overrides=CHEAP),
}

_STEPS = ["scaling_rl_steps/scaling_rl_steps.png", "scaling_rl_steps/report.md"]
_ALT = ["alternative_rl_temperature_1/report.md",
        "alternative_rl_temperature_1/pass_and_env_ce.png"]
_FLOOR = (
    " Held-out pass@1 sits at its floor: 64 tasks x 1 sample per seed resolve"
    " 1/64 = 0.016, GRPO itself peaks at 0.016 (one task), and the paper's"
    " effect (2.70% -> 5.17%) would need several hundred rollouts per arm to"
    " clear 2 s.e.; the :paper config evaluates 8 samples per task. The '> 2"
    " s.e.' bound is the project's rule (harness.effect_verdict), not the"
    " paper's, which states the direction only.")

DIAGNOSES = {
    "echo_0.005_raises_pass_at_1": dict(
        kind="scale",
        evidence="Default (60 steps, 3 seeds): +0.000 +- 0.009. In the RL-steps"
        " study (default model and warm start, 2 seeds, 2 x 8 rollouts per step)"
        " the paired difference is +0.000, +0.000, +0.008 +- 0.008 at 10, 20, 40"
        " steps: slope +0.0056 per e-fold (s.e. 0.0033, within 2 s.e.), so the"
        " trend points toward the claim but is not resolved." + _FLOOR,
        artefacts=_STEPS),
    "echo_0.005_lowers_env_ce": dict(
        kind="reconstruction",
        evidence="Default: +0.134 +- 0.056 (lambda = 0.005 ends with a higher"
        " probe CE than GRPO; the gap opens after step 40: +0.001 at 30, +0.118"
        " at 40, +0.148 at 60). The RL-steps study moves the same way, away from"
        " the claim: -0.000 +- 0.001, +0.036 +- 0.039, +0.043 +- 0.073 at 10, 20,"
        " 40 steps. Our choice: the probe CE is measured at temperature 1 while"
        " ECHO's term (paper code default) uses the log-probs at the sampling"
        " temperature 0.8, so the trained quantity is not the measured one. The"
        " alternative rl.temperature = 1.0 (sampling and ECHO's CE at 1, as the"
        " probe; 20 steps, the study's base) gives -0.002 +- 0.001 (PASS) where"
        " temperature 0.8 gives +0.036 +- 0.039; at lambda = 0.005 the effect is"
        " tiny either way, so the sign at 60 steps is seed noise on GRPO's"
        " drift as much as the objective.",
        artefacts=_STEPS + _ALT),
    "echo_0.05_raises_pass_at_1": dict(
        kind="scale",
        evidence="Default: +0.000 +- 0.012. RL-steps study: +0.000, +0.008 +-"
        " 0.008, +0.012 +- 0.004 (PASS) at 10, 20, 40 steps; slope +0.0085 per"
        " e-fold of steps (s.e. 0.0016, more than 2 s.e.), toward the claim and"
        " past the bound at 40 steps, though with 2 seeds (one degree of"
        " freedom) and a GRPO arm at 0.000." + _FLOOR,
        artefacts=_STEPS),
    "echo_0.05_lowers_env_ce": dict(
        kind="scale",
        evidence="Default: -0.223 +- 0.129 (right direction, 1.7 s.e.; GRPO's"
        " own drift varies by seed, 0.47-0.92 nats). RL-steps study: -0.003 +-"
        " 0.002, -0.015 +- 0.002 (PASS), -0.065 +- 0.025 (PASS) at 10, 20, 40"
        " steps; slope -0.018 per e-fold (s.e. 0.004, more than 2 s.e.): the gap"
        " grows with steps. At the default's mean and per-seed spread, 2 s.e."
        " is reached with about 5 seeds (0.129 * sqrt(3/5) = 0.100 < 0.111).",
        artefacts=_STEPS),
    "world_model_only_raises_pass_at_1": dict(
        kind="scale",
        evidence="Default: 0.000 -> 0.000 on every seed (FAIL: exact zero)."
        " RL-steps study: +0.004 +- 0.004, +0.004 +- 0.004, +0.000 at 10, 20, 40"
        " steps (slope -0.0028 per e-fold, s.e. 0.0016: not moving toward the"
        " claim at this scale); with rl.temperature = 1.0, +0.008 (one solved"
        " rollout per seed, PASS by sign alone). These are single solved tasks:"
        " the measurement floor, not an effect either way." + _FLOOR,
        artefacts=_STEPS + _ALT),
    "world_model_only_lowers_env_ce": dict(
        kind="scale",
        evidence="Default: -0.001 +- 0.001. RL-steps study: +0.004 +- 0.006,"
        " +0.001 +- 0.002, -0.007 +- 0.002 (PASS) at 10, 20, 40 steps; slope"
        " -0.010 per e-fold (s.e. 0.0035, more than 2 s.e.), toward the claim."
        " The effect is small because the probe is the warm start's own"
        " training distribution (random-command transcripts, already fit by 300"
        " steps), while world_model_only trains on the policy's rollouts; with"
        " rl.temperature = 1.0 (the probe's temperature) it is -0.002 +- 0.002"
        " at 20 steps, about as at 0.8 (+0.001 +- 0.002).",
        artefacts=_STEPS + _ALT),
    "echo_0.05_reaches_grpo_peak_sooner": dict(
        kind="scale",
        evidence="GRPO's peak pass@1 is 0.016 (one held-out task) in the default"
        " and at every study size, and lambda = 0.05 reaches it at GRPO's own"
        " step (steps saved: 0 at 10, 20, 40 steps and 0 in the default, step"
        " 40): at the pass@1 floor the peak is one lucky task, so the check has"
        " nothing to time. The bound 'any sooner' (> 0 steps saved, at the"
        " eval.every resolution) is ours; the paper reports up to 2.3x faster."
        " It needs a policy that solves tasks (the :paper config: 300 steps of"
        " 8 x 8 rollouts, 8 evaluation samples per task).",
        artefacts=_STEPS),
}
