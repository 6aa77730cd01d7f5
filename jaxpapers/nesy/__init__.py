"""Neurosymbolic learning as EM (EM-NeSy): E-steps over symbolic programs, M-step losses, training."""

from jaxpapers.nesy.addition import addition_examples
from jaxpapers.nesy.addition import DigitAddition
from jaxpapers.nesy.addition import digits_to_int
from jaxpapers.nesy.addition import sum_to_digits
from jaxpapers.nesy.addition import UnreachableSumError
from jaxpapers.nesy.em import em_loss
from jaxpapers.nesy.em import em_step
from jaxpapers.nesy.em import EStep
from jaxpapers.nesy.em import estep
from jaxpapers.nesy.em import INFERENCES
from jaxpapers.nesy.em import log_z
from jaxpapers.nesy.em import Posterior
from jaxpapers.nesy.em import reinforce_loss
from jaxpapers.nesy.em import semantic_loss
from jaxpapers.nesy.enumerated import addition_program
from jaxpapers.nesy.enumerated import enumerate_program
from jaxpapers.nesy.enumerated import EnumeratedProgram
from jaxpapers.nesy.training import addition_accuracy
from jaxpapers.nesy.training import addition_batch
from jaxpapers.nesy.training import init_state
from jaxpapers.nesy.training import make_train_step
from jaxpapers.nesy.training import METHODS
from jaxpapers.nesy.training import step_costs
from jaxpapers.nesy.training import train_epoch
from jaxpapers.nesy.training import TrainState
