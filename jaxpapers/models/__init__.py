"""Small reference models as pure functions of parameters."""

from jaxpapers.models.mlp import apply_mlp
from jaxpapers.models.mlp import init_mlp
from jaxpapers.models.mlp import MLPParams
from jaxpapers.models.transformer import attention_mask
from jaxpapers.models.transformer import dense_ffn
from jaxpapers.models.transformer import fsdp_gathered
from jaxpapers.models.transformer import gather_fsdp_params
from jaxpapers.models.transformer import gather_fsdp_params_like
from jaxpapers.models.transformer import MLP
from jaxpapers.models.transformer import next_token_loss
from jaxpapers.models.transformer import Transformer
from jaxpapers.models.transformer import TransformerConfig
from jaxpapers.models.forecasters import DLinear
from jaxpapers.models.forecasters import MLPForecaster
from jaxpapers.models.forecasters import moving_average
