"""Wasserstein: why update_speedup_vs_hungarian is inconclusive (see docs/wasserstein.md).

Study ``n``: the default streams (uniform and clustered, d = 2, 4, 8, p = 1
and 2, 10,000 operations, 5 shifts) at one n per side each, the speedup
check judged at that n (``speedup_size``). One Hungarian recomputation costs
O(n^3) (here about n^2 over this range), an update about O(levels) plus the
structure's per-n overhead, so the speedup should grow with n.
"""

from experiments.configs.scaling import study

STUDIES = {
    "n": study(
        axis="speedup_size", what="n points per side",
        sizes=[{"speedup_size": n, "sizes": (n,)} for n in (128, 256, 512, 1024)],
        checks=["update_speedup_vs_hungarian"]),
}

DIAGNOSES = {
    "update_speedup_vs_hungarian": dict(
        kind="scale",
        evidence=(
            "At n = 512 the median speedup, 1292x (b5136d3, 2-core CPU), lies"
            " above the 1000x bound, but its 10-90% spread (947-1528x) contains"
            " it: INCONCLUSIVE, not FAIL (the ddfbaee run: 1273x, 979-2448x)."
            " The speedup grows with n: 147, 301, 564, 1292x at n = 64-512 in"
            " the same run (x1.9-2.3 per doubling; Hungarian 1.2 to 18.3 ms,"
            " update 6-8 to 14 us), so the check should pass at n = 1024"
            " (about 2500x)."
            " Study n (one n per run): 379 +- 33, 720 +- 65, 3335 +- 381 and"
            " 12645 +- 1995x (median, bootstrap s.e.) at n = 128, 256, 512,"
            " 1024, +736x per e-fold of n (s.e. 99), PASS from n = 512; it ran"
            " at load average 9-26 on 2 cores, which slows the Hungarian more"
            " than the update (259 vs 22.5 ms idle at n = 512), so its values"
            " overstate an idle machine's about 3x: the verdict is also"
            " machine-dependent. The 1000x at n = 512 is our own bound (the"
            " abstract gives asymptotic update times, no ratio), set at the"
            " order of magnitude our idle runs measured."),
        artefacts=["scaling_n/scaling_n.png", "scaling_n/report.md",
                   "update_vs_recompute.png"]),
}
