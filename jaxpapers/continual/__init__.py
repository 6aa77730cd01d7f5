"""Continual learning: DAF adapter fusion, adapters, class-incremental training
and the task sequence that learns one global adapter (:func:`learn_sequence`)."""

from jaxpapers import _deprecation
from jaxpapers.continual._adapter import CosineClassifier
from jaxpapers.continual._adapter import LowRankAdapter
from jaxpapers.continual._fusion import DAFState
from jaxpapers.continual._fusion import fuse
from jaxpapers.continual._fusion import FusionConfig
from jaxpapers.continual._fusion import FusionInfo
from jaxpapers.continual._fusion import init
from jaxpapers.continual._fusion import objective
from jaxpapers.continual._fusion import update
from jaxpapers.continual._incremental import adapter_fisher
from jaxpapers.continual._incremental import class_incremental_metrics
from jaxpapers.continual._incremental import Graphs
from jaxpapers.continual._incremental import init_learner
from jaxpapers.continual._incremental import logits
from jaxpapers.continual._incremental import predict
from jaxpapers.continual._incremental import TaskTraining
from jaxpapers.continual._incremental import train_task
from jaxpapers.continual._sequence import class_order
from jaxpapers.continual._sequence import learn_sequence
from jaxpapers.continual._sequence import sequence_metrics
from jaxpapers.continual._sequence import TaskRows

__all__ = [
    "CosineClassifier",
    "LowRankAdapter",
    "DAFState",
    "fuse",
    "FusionConfig",
    "FusionInfo",
    "init",
    "objective",
    "update",
    "adapter_fisher",
    "class_incremental_metrics",
    "Graphs",
    "init_learner",
    "logits",
    "predict",
    "TaskTraining",
    "train_task",
    "class_order",
    "learn_sequence",
    "sequence_metrics",
    "TaskRows",
]

_deprecation.install(__name__)
