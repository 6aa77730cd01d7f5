"""EMC: why six checks of the default report do not pass (see docs/emc.md).

Studies: the peak-memory cut against the graph's size (one sequence each,
only EMC and GCAL-style, one seed: the compiled footprint is deterministic
and does not depend on the weights, so the source model trains 2 epochs),
and the accuracy gaps and forgetting on digits against the number of
domains (the "prolonged shift" the paper's argument rests on) at the
default model, 2 seeds. csbm_ap_vs_tent: an alternative of our
reconstruction (predict="bn") in the committed run itself.
"""

from experiments.configs.scaling import study

# Only the update's compiled footprint is followed: no training needed, one
# seed, 3 domains (GCAL-style's buffer of one memory graph per target, 8 x
# about 5% of the nodes x 32 features, is well under 1% of its footprint).
_MEMORY = {"seeds": (0,), "methods": ("gcal", "emc"), "model.epochs": 2,
           "timing_rounds": 1, "csbm.num_domains": 3, "digits.num_domains": 3}

STUDIES = {
    # Expected degree held at the default's 8 (p_in = 20 / n, p_out = 4 / n).
    "memory_csbm": study(
        axis="csbm.num_nodes", what="CSBM nodes per domain",
        sizes=[{"csbm.num_nodes": n, "csbm.p_in": 20 / n, "csbm.p_out": 4 / n}
               for n in (500, 1000, 2000, 4000)],
        checks=["csbm_memory_cut_vs_gcal"],
        overrides={**_MEMORY, "sequences": ("csbm",)}),
    "memory_digits": study(
        axis="digits.nodes_per_domain", what="digits images per domain",
        sizes=[{"digits.nodes_per_domain": n} for n in (500, 1000, 1500, 1797)],
        checks=["digits_memory_cut_vs_gcal"],
        overrides={**_MEMORY, "sequences": ("digits",)}),
    "domains_digits": study(
        axis="digits.num_domains", what="digits domains (source + targets)",
        sizes=[{"digits.num_domains": t} for t in (3, 5, 9, 17)],
        checks=["digits_ap_vs_direct", "digits_ap_vs_gcal",
                "digits_forgetting_near_zero"],
        overrides={"seeds": (0, 1), "methods": ("direct", "gcal", "emc"),
                   "sequences": ("digits",), "timing_rounds": 1}),
}

_MEMORY_EVIDENCE = (
    "XLA's compiled footprint of one EMC update over one GCAL-style update (1 seed: it is"
    " deterministic; 3 domains, hidden 256) falls with the graph: {values}. {trend} The paper's"
    " 92.4% cut is a GPU measurement on real graphs of unknown size; ours is our JAX GCAL-style"
    " on CPU, so only the direction is comparable.")

DIAGNOSES = {
    "csbm_memory_cut_vs_gcal": dict(
        kind="scale",
        evidence=_MEMORY_EVIDENCE.format(
            values="ratio 0.288, 0.153, 0.087, 0.064 at 500, 1000, 2000, 4000 nodes per domain"
                   " (expected degree 8 throughout; the default's 2000 gives 0.087 here and 0.086"
                   " in the committed report)",
            trend="The cut passes 92.4% between 2000 and 4000 nodes (93.6% at 4000; log-log"
                  " interpolation: about 2,700 nodes); the fit a + b log n (slope -0.106 per"
                  " e-fold, s.e. 0.026) is already past the bound at 4000. GCAL-style's footprint"
                  " grows faster than EMC's (x3.5 vs x2.6 from 2000 to 4000 nodes). A few steps of"
                  " the :paper config (10,000 nodes, 2 domains) give 0.039 (cut 96.1%)."),
        artefacts=["scaling_memory_csbm/scaling_memory_csbm.png",
                   "scaling_memory_csbm/report.md", "paper_few_steps/report.md"]),
    "digits_memory_cut_vs_gcal": dict(
        kind="scale",
        evidence=_MEMORY_EVIDENCE.format(
            values="ratio 0.272, 0.147, 0.113, 0.101 at 500, 1000, 1500 and 1797 images per"
                   " domain (1797 is every image of the data set; the default's 1000 gives 0.147"
                   " here, 0.149 in the committed report)",
            trend="The fit a + b log n (slope -0.136 per e-fold, s.e. 0.019) reaches the bound"
                  " 0.076 at about 1,970 images per domain (log-log extrapolation of the last two"
                  " sizes: about 2,800), more images than digits has: at its largest graph the cut"
                  " is 89.9%, and the CSBM study passes the bound at 4000 nodes."),
        artefacts=["scaling_memory_digits/scaling_memory_digits.png",
                   "scaling_memory_digits/report.md"]),
    "digits_ap_vs_direct": dict(
        kind="scale",
        evidence="Over the length of the drifting sequence (the paper's 'prolonged shift'; 2"
                 " seeds, default model) AP(EMC) - AP(direct) is -0.002 +- 0.003, -0.014 +- 0.008,"
                 " -0.024 +- 0.019 and +0.079 +- 0.017 at 3, 5, 9 and 17 domains: the gap first"
                 " widens, then direct adaptation's error accumulates (its AP falls to 0.380,"
                 " forgetting 0.157) and EMC (0.459) leads at 17 domains, where the check passes."
                 " In that 17-domain run the gap AP_i(EMC) - AP_i(direct) crosses the bound -0.01"
                 " at 13 domains (-0.024, -0.013, -0.009, +0.007 at 11, 12, 13, 14). The"
                 " log-linear fit (+0.020 per e-fold, s.e. 0.008) is already past the bound at 17."
                 " The -0.01 tolerance is ours (about two s.e. of a 3-seed AP here).",
        artefacts=["scaling_domains_digits/scaling_domains_digits.png",
                   "scaling_domains_digits/report.md"]),
    "digits_ap_vs_gcal": dict(
        kind="scale",
        evidence="Over the length of the sequence (2 seeds) AP(EMC) - AP(GCAL-style) is -0.004 +-"
                 " 0.003, -0.016 +- 0.007, -0.014 +- 0.032 and +0.092 +- 0.055 at 3, 5, 9 and 17"
                 " domains: GCAL-style's AP falls to 0.368 at 17 domains (forgetting 0.144),"
                 " EMC's to 0.459, and the check passes there. In that run the per-step gap"
                 " crosses the bound -0.01 at 11 domains (-0.020 at 10, -0.001 at 11, +0.015 at"
                 " 12). The s.e.-weighted log-linear fit leans on the precise short sequences"
                 " and reads 'moves away' (-0.010 per e-fold, s.e. 0.012, within 2 s.e.); the"
                 " measure is not monotone. Of our reconstruction's variants (committed run, 9"
                 " domains) the closest is predict='bn', 0.753 vs 0.769 (-0.016; -0.0100 against 0.763, at the"
                 " bound). The -0.01 tolerance is ours.",
        artefacts=["scaling_domains_digits/scaling_domains_digits.png",
                   "scaling_domains_digits/report.md"]),
    "digits_forgetting_near_zero": dict(
        kind="method",
        evidence="EMC's forgetting on digits grows with the sequence and does not approach 0:"
                 " 0.002 +- 0.002, 0.002 +- 0.002, 0.030 +- 0.006 and 0.064 +- 0.003 at 3, 5, 9 and"
                 " 17 domains (2 seeds; +0.032 per e-fold, s.e. 0.002), though it stays under the"
                 " gradient baselines' (direct 0.157, GCAL-style 0.144 at 17 domains). No variant"
                 " of our reconstruction in the committed run is within +-0.02 without losing"
                 " accuracy: predict='bn' 0.021 +- 0.005, evolve none/drift/transition 0.029/0.033/"
                 "0.049, im_replay 0.052; only coral has 0.000, at an AP (0.624) below the frozen"
                 " model's (0.678). The +-0.02 bound is ours: the abstract claims nothing about"
                 " forgetting; our protocol expects it 'near 0' (docs/emc.md).",
        artefacts=["scaling_domains_digits/scaling_domains_digits.png",
                   "scaling_domains_digits/report.md", "report.md"]),
    "csbm_ap_vs_tent": dict(
        kind="reconstruction",
        evidence="Our default EMC predicts with the source BatchNorm statistics; Tent re-estimates"
                 " them on each target, which is what gains on the CSBM's covariate shift (class"
                 " means rotate and shift). Alternatives of our reconstruction in the same"
                 " committed run (3 seeds, final AP +- s.e.): predict='bn' (BatchNorm statistics"
                 " re-estimated on target and memory) 0.848 +- 0.005 vs Tent 0.845 +- 0.006, which"
                 " passes the check; default 0.801 +- 0.018, coral 0.794, evolve none/drift/"
                 "transition 0.799/0.801/0.800, T3A 0.799. The gap of the default widens along the"
                 " sequence (AP_i(EMC) - AP_i(Tent): +0.004 at i=0, 0.000 at 1, -0.016 at 4, -0.044"
                 " at 8), that of 'bn' stays between 0 and +0.003. The -0.01 tolerance is ours"
                 " (about two s.e. of a 3-seed AP here); the paper gives no accuracy numbers.",
        artefacts=["report.md", "accuracy_over_sequence.png"]),
}
