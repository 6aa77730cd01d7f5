"""Experiment configs: one module per binary, each with ``get_config(arg)``."""
