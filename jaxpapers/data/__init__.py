"""Data: sets that ship inside pip packages, generators, and pure mini-batch sampling."""

from jaxpapers.data.advection import advection_dataset
from jaxpapers.data.advection import advection_trajectory
from jaxpapers.data.digits import Digits
from jaxpapers.data.digits import DigitsSplit
from jaxpapers.data.digits import load_digits
from jaxpapers.data.digits import split_digits
from jaxpapers.data.sampling import minibatch_indices
from jaxpapers.data.sampling import sample_minibatches
from jaxpapers.data.sampling import take
from jaxpapers.data import multidomain
from jaxpapers.data import text
from jaxpapers.data.series import chronological_split
from jaxpapers.data.series import ChronologicalSplit
from jaxpapers.data.series import load_series
from jaxpapers.data.series import lorenz96
from jaxpapers.data.series import Series
from jaxpapers.data.series import sliding_windows
from jaxpapers.data.series import STATSMODELS_SERIES
