"""Editing of bitwise-residual visual autoregressive (VAR) generators: BitResEdit.

* BitEdit: per-bit log-odds guidance in a Bernoulli-KL trust region, with a
  quadratic or exact radius (:func:`bit_edit`, :func:`guide`,
  :func:`trust_radius`).
* ResEdit: masked per-scale code residuals through the sum of scales
  (:func:`compose`, :func:`sum_of_scales`).
* The generator interface (:class:`BitwiseGenerator`), the clean CFG sampler
  (:func:`sample`), the BitResEdit editor loop (:func:`edit`) and an edit's
  scores (:func:`edit_scores`).
* A small bitwise-residual generator for CPU runs (:func:`toy_generator`) and
  batches of editing tasks for it, edited and scored (:func:`edit_batch`,
  :func:`score_edits`).
"""

from jaxpapers import _deprecation
from jaxpapers.var._bitedit import bernoulli_kl
from jaxpapers.var._bitedit import bit_edit
from jaxpapers.var._bitedit import BitEdit
from jaxpapers.var._bitedit import cfg
from jaxpapers.var._bitedit import guide
from jaxpapers.var._bitedit import Guidance
from jaxpapers.var._bitedit import log_odds
from jaxpapers.var._bitedit import project
from jaxpapers.var._bitedit import quadratic_radius_error
from jaxpapers.var._bitedit import sample_bits
from jaxpapers.var._bitedit import trust_radius
from jaxpapers.var._editing import BitwiseGenerator
from jaxpapers.var._editing import edit
from jaxpapers.var._editing import edit_scores
from jaxpapers.var._editing import Edited
from jaxpapers.var._editing import EditScores
from jaxpapers.var._editing import sample
from jaxpapers.var._editing import Sample
from jaxpapers.var._resedit import codes_from_bits
from jaxpapers.var._resedit import compose
from jaxpapers.var._resedit import compose_scale
from jaxpapers.var._resedit import sum_of_scales
from jaxpapers.var._toy import edit_batch
from jaxpapers.var._toy import EditBatch
from jaxpapers.var._toy import score_edits
from jaxpapers.var._toy import ScoredEdits
from jaxpapers.var._toy import toy_generator
from jaxpapers.var._toy import ToyGenerator
from jaxpapers.var._bitedit import TRUST_MODES

__all__ = [
    "TRUST_MODES",
    "bernoulli_kl",
    "bit_edit",
    "BitEdit",
    "cfg",
    "guide",
    "Guidance",
    "log_odds",
    "project",
    "quadratic_radius_error",
    "sample_bits",
    "trust_radius",
    "BitwiseGenerator",
    "edit",
    "edit_scores",
    "Edited",
    "EditScores",
    "sample",
    "Sample",
    "codes_from_bits",
    "compose",
    "compose_scale",
    "sum_of_scales",
    "edit_batch",
    "EditBatch",
    "score_edits",
    "ScoredEdits",
    "toy_generator",
    "ToyGenerator",
]

_deprecation.install(__name__)
