"""Experiment binaries (absl + ml_collections) that reproduce each paper's claim.

Run one as ``python -m experiments.<name> --config experiments/configs/<name>.py``.
All binaries share :mod:`experiments.harness`.
"""
