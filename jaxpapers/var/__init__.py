"""Editing of bitwise-residual visual autoregressive (VAR) generators: BitResEdit.

* :mod:`jaxpapers.var.bitedit` -- per-bit log-odds guidance in a Bernoulli-KL
  trust region (quadratic or exact radius).
* :mod:`jaxpapers.var.resedit` -- masked per-scale code residuals through the
  sum of scales.
* :mod:`jaxpapers.var.editing` -- the generator interface, the clean CFG
  sampler, the BitResEdit editor loop and an edit's scores.
* :mod:`jaxpapers.var.toy` -- a small bitwise-residual generator for CPU runs
  and batches of editing tasks for it, edited and scored.
"""

from jaxpapers.var.bitedit import bernoulli_kl
from jaxpapers.var.bitedit import bit_edit
from jaxpapers.var.bitedit import BitEdit
from jaxpapers.var.bitedit import cfg
from jaxpapers.var.bitedit import guide
from jaxpapers.var.bitedit import Guidance
from jaxpapers.var.bitedit import log_odds
from jaxpapers.var.bitedit import project
from jaxpapers.var.bitedit import quadratic_radius_error
from jaxpapers.var.bitedit import sample_bits
from jaxpapers.var.bitedit import trust_radius
from jaxpapers.var.editing import BitwiseGenerator
from jaxpapers.var.editing import edit
from jaxpapers.var.editing import edit_scores
from jaxpapers.var.editing import Edited
from jaxpapers.var.editing import EditScores
from jaxpapers.var.editing import sample
from jaxpapers.var.editing import Sample
from jaxpapers.var.resedit import codes_from_bits
from jaxpapers.var.resedit import compose
from jaxpapers.var.resedit import compose_scale
from jaxpapers.var.resedit import sum_of_scales
from jaxpapers.var.toy import edit_batch
from jaxpapers.var.toy import EditBatch
from jaxpapers.var.toy import score_edits
from jaxpapers.var.toy import ScoredEdits
from jaxpapers.var.toy import toy_generator
from jaxpapers.var.toy import ToyGenerator
