"""Data sets that ship inside pip packages, and pure mini-batch sampling."""

from jaxpapers.data.digits import Digits
from jaxpapers.data.digits import load_digits
from jaxpapers.data.sampling import minibatch_indices
from jaxpapers.data.sampling import sample_minibatches
from jaxpapers.data.sampling import take
from jaxpapers.data import text
from jaxpapers.data.advection import advection_dataset
from jaxpapers.data.advection import advection_trajectory
