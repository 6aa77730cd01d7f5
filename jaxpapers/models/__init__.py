"""Small reference models as pure functions of parameters."""

from jaxpapers import _deprecation
from jaxpapers.models._language_model import Corpus
from jaxpapers.models._language_model import LanguageModel
from jaxpapers.models._language_model import load_corpus
from jaxpapers.models._language_model import LMTrainer
from jaxpapers.models._language_model import lookahead
from jaxpapers.models._language_model import mean_loss
from jaxpapers.models._language_model import muon_dimension_numbers
from jaxpapers.models._language_model import Optimizer
from jaxpapers.models._language_model import schedule_free
from jaxpapers.models._language_model import steps_to_reach
from jaxpapers.models._language_model import train_chunk
from jaxpapers.models._language_model import validation_windows
from jaxpapers.models._language_model import wsd_schedule
from jaxpapers.models._mlp import apply_mlp
from jaxpapers.models._mlp import init_mlp
from jaxpapers.models._mlp import MLPParams
from jaxpapers.models._transformer import attention_mask
from jaxpapers.models._transformer import dense_ffn
from jaxpapers.models._transformer import fsdp_gathered
from jaxpapers.models._transformer import gather_fsdp_params
from jaxpapers.models._transformer import gather_fsdp_params_like
from jaxpapers.models._transformer import MLP
from jaxpapers.models._transformer import next_token_loss
from jaxpapers.models._transformer import Transformer
from jaxpapers.models._transformer import TransformerConfig
from jaxpapers.models._forecasters import DLinear
from jaxpapers.models._forecasters import MLPForecaster
from jaxpapers.models._forecasters import moving_average
from jaxpapers.models._forecaster_training import evaluate_members
from jaxpapers.models._forecaster_training import forecast_task
from jaxpapers.models._forecaster_training import ForecastTask
from jaxpapers.models._forecaster_training import forecaster_optimizer
from jaxpapers.models._forecaster_training import ForecasterGroup
from jaxpapers.models._forecaster_training import GroupState
from jaxpapers.models._forecaster_training import init_group
from jaxpapers.models._forecaster_training import make_forecaster
from jaxpapers.models._forecaster_training import make_train_chunk

__all__ = [
    "Corpus",
    "LanguageModel",
    "load_corpus",
    "LMTrainer",
    "lookahead",
    "mean_loss",
    "muon_dimension_numbers",
    "Optimizer",
    "schedule_free",
    "steps_to_reach",
    "train_chunk",
    "validation_windows",
    "wsd_schedule",
    "apply_mlp",
    "init_mlp",
    "MLPParams",
    "attention_mask",
    "dense_ffn",
    "fsdp_gathered",
    "gather_fsdp_params",
    "gather_fsdp_params_like",
    "MLP",
    "next_token_loss",
    "Transformer",
    "TransformerConfig",
    "DLinear",
    "MLPForecaster",
    "moving_average",
    "evaluate_members",
    "forecast_task",
    "ForecastTask",
    "forecaster_optimizer",
    "ForecasterGroup",
    "GroupState",
    "init_group",
    "make_forecaster",
    "make_train_chunk",
]

_deprecation.install(__name__)
