"""EM-NeSy: why some checks do not pass at CPU scale (see docs/em_nesy.md)."""

from experiments.configs.scaling import study

# Training runs only where the followed checks need them; the cost stage as small as it may be.
_N1_ONLY = {"num_digits": (1,), "exact_num_digits": (), "train_sums": 5000, "test_sums": 2000,
            "epochs": 10, "checkpoint_every": 10, "cost_num_digits": (1,),
            "enumeration_num_digits": (), "timing_rounds": 1}

STUDIES = {
    # The rejection E-step's sample budget S (ours: 256; the paper gives none) at N = 1.
    "rejection_samples": study(
        axis="rejection_samples", what="rejection samples S per example",
        sizes=[{"rejection_samples": s} for s in (64, 256, 1024, 4096)],
        checks=["rejection_works_at_1"], base="smoke",
        overrides={**_N1_ONLY, "seeds": (0, 1, 2, 3, 4), "methods": ("em_exact", "em_rejection")}),
    # Training sums per epoch: ours 5,000, the protocol's 20,000.
    "train_sums": study(
        axis="train_sums", what="training sums per epoch",
        sizes=[{"train_sums": s} for s in (1250, 5000, 20000)],
        checks=["rejection_works_at_1", "em_hard_trains_at_4"], base="smoke",
        overrides={**_N1_ONLY, "num_digits": (1, 4), "seeds": (0, 1, 2),
                   "methods": ("em_exact", "em_rejection", "em_hard")}),
    # Sums per training step: the fixed cost of a step against the work that grows with N.
    "batch_size": study(
        axis="batch_size", what="sums per training step (batch size)",
        sizes=[{"batch_size": b} for b in (8, 32, 128, 512)],
        checks=["enumeration_explodes", "em_faster_than_semantic_at_15",
                "em_memory_vs_semantic_at_15"], base="smoke",
        overrides={**_N1_ONLY, "seeds": (0,), "methods": ("em_exact",), "train_sums": 1024,
                   "test_sums": 200, "epochs": 1, "checkpoint_every": 1,
                   "cost_num_digits": (1, 2, 15), "enumeration_num_digits": (1, 2),
                   "timing_rounds": 7}),
}

_SWAP = ("At seed 0 the MLP locks into a digit-swap local optimum (0->1, 2->1, 4->5, 7->8, ...;"
         " per-digit accuracy 0.002-0.03, sum accuracy ~0.49 at N = 1 because the swaps often"
         " cancel), so the mean over 3 seeds is ~0.66 while seeds 1 and 2 reach 0.98.")

DIAGNOSES = {
    "rejection_works_at_1": dict(kind="method", evidence=(
        _SWAP + " Not a bug: with 10^5 samples the rejection marginals match the exact ones"
        " (mean |dq| 0.002, gradient cosine 0.9999), and the default rerun at 83dad7d (after"
        " the correctness pass) gives the same 0.653 vs 0.982. Which runs lock in does not move"
        " with the sample budget S (share of exact EM's digit accuracy over 5 seeds: S = 64"
        " 0.998, 256 0.799 +- 0.199, 1024 1.000, 4096 1.000; only seed 0 at S = 256 fails) nor"
        " with data (3 seeds: 1,250 sums 1.000, 5,000 0.666 +- 0.332, 20,000 0.998): a chance"
        " basin of a biased approximate E-step, not a trend. The 5% tolerance is our own reading"
        " of the abstract's 'extends to approximate reasoning'."),
        artefacts=["scaling_rejection_samples/scaling_rejection_samples.png",
                   "scaling_rejection_samples/report.md", "scaling_train_sums/report.md"]),
    "em_hard_trains_at_4": dict(kind="method", evidence=(
        _SWAP + " Hard EM (Viterbi, one-hot targets) falls into it at seed 0 at every N we ran"
        " (1, 2, 4, 15) and every data size: share of exact EM's digit accuracy 0.671 +- 0.330 at"
        " 5,000 sums and 0.670 +- 0.330 at 20,000 (the protocol's), while exact EM escapes it"
        " (0.98-0.99); at 1,250 sums exact EM falls in too (share 1.006 +- 2.67, both stuck)."
        " Mode-seeking self-training, not scale; the 5% tolerance is ours."),
        artefacts=["scaling_train_sums/scaling_train_sums.png", "scaling_train_sums/report.md"]),
    "enumeration_explodes": dict(kind="scale", evidence=(
        "100x more worlds from N = 1 to 2 shows in a step's time only when the batch outweighs"
        " a step's fixed cost: enumeration's paired time ratio (one run, 7 rounds, loaded CPU) is"
        " 6.3x at batch 8, 15.5x at 32, 47x at 128 and 265x at 512 (+58 per e-fold of batch,"
        " s.e. 25), past 10x from batch 32 on in that loaded study. At the default batch 32 the"
        " committed report (b5136d3) has 11.2x with a 10-90% spread of 8.5-16.5x that holds the"
        " bound; earlier runs had 7.9x (a87bf01, load ~4), 9.7x (ddfbaee, idle cores) and 13.2x"
        " (load 23): a larger batch (>= 64 on quiet cores) shows the explosion clearly. The 10x bound is ours (a tenth of the 100x worlds)."),
        artefacts=["scaling_batch_size/scaling_batch_size.png", "scaling_batch_size/report.md"]),
    "em_faster_than_semantic_at_15": dict(kind="method", evidence=(
        "EM's exact E-step is a forward-backward over the carry chain, the same work as"
        " autodiff of log Z, and both are small next to the MLP on 2N images: the EM / semantic"
        " step-time ratio at N = 15 is 1.11, 1.16, 1.04, 1.11 at batch 8, 32, 128, 512 (slope"
        " -0.009 per e-fold, s.e. 0.018), and 1.00-1.17 at N = 1, 2, 4, 15, 100 in the default run; it does"
        " not move toward the secondary source's 1/2.6 (its setting is not given)."),
        artefacts=["scaling_batch_size/scaling_batch_size.png", "scaling_batch_size/report.md"]),
    "em_memory_vs_semantic_at_15": dict(kind="method", evidence=(
        "The compiled footprint of an EM step is that of a semantic-loss step: ratio 0.999,"
        " 0.995, 1.010, 1.004 at batch 8, 32, 128, 512 (0.70 to 32.6 MiB), and 0.995-1.007 at"
        " N = 1..100 in the default run; the carry chain's residuals for autodiff are as small as"
        " EM's forward-backward messages, so the secondary source's 60% saving does not appear."),
        artefacts=["scaling_batch_size/scaling_batch_size.png", "scaling_batch_size/report.md"]),
}
