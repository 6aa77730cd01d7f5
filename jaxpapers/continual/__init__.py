"""Continual learning: DAF adapter fusion, adapters, class-incremental training
and the task sequence that learns one global adapter (:func:`learn_sequence`)."""

from jaxpapers.continual.adapter import CosineClassifier
from jaxpapers.continual.adapter import LowRankAdapter
from jaxpapers.continual.fusion import DAFState
from jaxpapers.continual.fusion import fuse
from jaxpapers.continual.fusion import FusionConfig
from jaxpapers.continual.fusion import FusionInfo
from jaxpapers.continual.fusion import init
from jaxpapers.continual.fusion import objective
from jaxpapers.continual.fusion import update
from jaxpapers.continual.incremental import adapter_fisher
from jaxpapers.continual.incremental import class_incremental_metrics
from jaxpapers.continual.incremental import Graphs
from jaxpapers.continual.incremental import init_learner
from jaxpapers.continual.incremental import logits
from jaxpapers.continual.incremental import predict
from jaxpapers.continual.incremental import TaskTraining
from jaxpapers.continual.incremental import train_task
from jaxpapers.continual.sequence import class_order
from jaxpapers.continual.sequence import learn_sequence
from jaxpapers.continual.sequence import sequence_metrics
from jaxpapers.continual.sequence import TaskRows
