"""Neurosymbolic learning as EM (EM-NeSy): E-steps over symbolic programs, M-step losses, training."""

from jaxpapers import _deprecation
from jaxpapers.nesy._addition import addition_examples
from jaxpapers.nesy._addition import DigitAddition
from jaxpapers.nesy._addition import digits_to_int
from jaxpapers.nesy._addition import sum_to_digits
from jaxpapers.nesy._addition import UnreachableSumError
from jaxpapers.nesy._em import em_loss
from jaxpapers.nesy._em import em_step
from jaxpapers.nesy._em import EStep
from jaxpapers.nesy._em import estep
from jaxpapers.nesy._em import INFERENCES
from jaxpapers.nesy._em import log_z
from jaxpapers.nesy._em import Posterior
from jaxpapers.nesy._em import reinforce_loss
from jaxpapers.nesy._em import semantic_loss
from jaxpapers.nesy._enumerated import addition_program
from jaxpapers.nesy._enumerated import enumerate_program
from jaxpapers.nesy._enumerated import EnumeratedProgram
from jaxpapers.nesy._training import addition_accuracy
from jaxpapers.nesy._training import addition_batch
from jaxpapers.nesy._training import init_state
from jaxpapers.nesy._training import make_train_step
from jaxpapers.nesy._training import METHODS
from jaxpapers.nesy._training import step_costs
from jaxpapers.nesy._training import train_epoch
from jaxpapers.nesy._training import TrainState

__all__ = [
    "addition_examples",
    "DigitAddition",
    "digits_to_int",
    "sum_to_digits",
    "UnreachableSumError",
    "em_loss",
    "em_step",
    "EStep",
    "estep",
    "INFERENCES",
    "log_z",
    "Posterior",
    "reinforce_loss",
    "semantic_loss",
    "addition_program",
    "enumerate_program",
    "EnumeratedProgram",
    "addition_accuracy",
    "addition_batch",
    "init_state",
    "make_train_step",
    "METHODS",
    "step_costs",
    "train_epoch",
    "TrainState",
]

_deprecation.install(__name__)
