"""Saddle: why DM-SP does not need fewer rounds than EG at L_xx = L_xy; docs/saddle_decoupled.md."""

from experiments.configs.scaling import study

# The default game (d = 200, seed 0) at the failing ratio 1 and at ratio 10, DM-SP against EG
# (EG still takes the best of its three steps).
AT_RATIO_ONE = {"ratios": (1.0, 10.0), "methods": ("dm_sp", "extragradient")}

STUDIES = {
    "eta": study(
        axis="dm_sp_eta_multiplier", what="DM-SP's eta in units of its default 1/(2 L_xy)",
        sizes=[{"dm_sp_eta_multiplier": m} for m in (0.5, 1.0, 1.5, 2.0)],
        checks=["dm_sp_fewer_rounds_than_eg"], overrides=AT_RATIO_ONE),
    "dim": study(
        axis="dim", what="game dimension d = d_x = d_y",
        sizes=[{"dim": d} for d in (50, 100, 200, 400)],
        checks=["dm_sp_fewer_rounds_than_eg"], overrides=AT_RATIO_ONE),
}

DIAGNOSES = {
    "dm_sp_fewer_rounds_than_eg": dict(
        kind="reconstruction",
        evidence="Only L_xx = L_xy fails (367 vs 348 rounds, ratio 1.055; from ratio 10 on DM-SP"
                 " needs 12-900x fewer). Our choice: DM-SP runs at one untuned eta = 1/(2 L_xy)"
                 " while EG takes the best of three steps, and wins at ratio 1 only with 2x its"
                 " textbook step, at the edge of its stability. The alternative eta = 0.75/L_xy"
                 " (still eta L_xy < 1, a Jacobi contraction) needs 321 rounds and the check"
                 " passes (ratio 0.92); eta x 0.5 and x 2, EG's own grid, give 749 and 613"
                 " (2.15, 1.76), so on that grid the default stays the best. Over d = 50-400 the"
                 " ratio at L_xx = L_xy is 0.99/0.98/1.055/1.04 (slope +0.03 per e-fold, within"
                 " 2 s.e.): a tie within 6% that does not move with size. The threshold 'at every"
                 " ratio' is ours, from a machine-written summary ('beats EG on communication"
                 " always'); the abstract claims matching the communication lower bound, an order"
                 " statement that both methods meet at L_xx = L_xy.",
        artefacts=["scaling_eta/scaling_eta.png", "scaling_eta/report.md",
                   "scaling_dim/scaling_dim.png", "scaling_dim/report.md"]),
}
