"""Why each check that does not pass does not pass: one module per binary.

``experiments/diagnoses/<binary>.py`` defines ``DIAGNOSES``, check id ->
``experiments.harness.diagnosis(kind, evidence, artefacts)``; the harness
attaches each to its check in the report when that check does not pass
(:func:`experiments.harness.cli.diagnoses_of`). The evidence of kind
``scale`` and ``method`` is a scaling study (``python -m
experiments.scaling``) kept under ``experiments/results/<binary>/``.
"""
