"""Agent RL on byte transcripts: GRPO, ECHO's environment cross-entropy, a toy shell."""

from jaxpapers import _deprecation
from jaxpapers.rl._echo import N_OBS_EPSILON
from jaxpapers.rl._echo import MASK_MODES
from jaxpapers.rl._echo import SCHEDULES
from jaxpapers.rl._echo import span_mask
from jaxpapers.rl._echo import shift_for_next_token
from jaxpapers.rl._grpo import STD_EPSILON
from jaxpapers.rl._grpo import check_same_shape
from jaxpapers.rl._grpo import sequence_mean
from jaxpapers.rl._rollout import Cache
from jaxpapers.rl._rollout import init_cache
from jaxpapers.rl._rollout import decode as rollout_decode
from jaxpapers.rl._rollout import sample as rollout_sample
from jaxpapers.rl._rollout import sample_split as rollout_sample_split
from jaxpapers.rl._shell import KEYS as SHELL_KEYS
from jaxpapers.rl._shell import NUM_KEYS as SHELL_NUM_KEYS
from jaxpapers.rl._shell import VALUE_MODULUS as SHELL_VALUE_MODULUS
from jaxpapers.rl._shell import EOT as SHELL_EOT
from jaxpapers.rl._shell import VOCAB_SIZE as SHELL_VOCAB_SIZE
from jaxpapers.rl._shell import SCAFFOLDING as SHELL_SCAFFOLDING
from jaxpapers.rl._shell import WARNING as SHELL_WARNING
from jaxpapers.rl._shell import WARNING_SEPARATOR as SHELL_WARNING_SEPARATOR
from jaxpapers.rl._shell import ShellLayout
from jaxpapers.rl._shell import Store
from jaxpapers.rl._shell import Tasks
from jaxpapers.rl._shell import Spans
from jaxpapers.rl._shell import Transcripts
from jaxpapers.rl._shell import encode as shell_encode
from jaxpapers.rl._shell import decode as shell_decode
from jaxpapers.rl._shell import encode_command
from jaxpapers.rl._shell import execute as shell_execute
from jaxpapers.rl._shell import observation as shell_observation
from jaxpapers.rl._shell import step as shell_step
from jaxpapers.rl._shell import assemble as shell_assemble
from jaxpapers.rl._shell import spans_of
from jaxpapers.rl._shell import verify as shell_verify
from jaxpapers.rl._shell import scripted as shell_scripted
from jaxpapers.rl._shell import transcripts_of
from jaxpapers.rl._shell import render_goal
from jaxpapers.rl._shell import make_tasks
from jaxpapers.rl._shell import command_table
from jaxpapers.rl._training import RLConfig
from jaxpapers.rl._training import optimizer as rl_optimizer
from jaxpapers.rl._training import transcript_log_probs
from jaxpapers.rl._training import rl_loss
from jaxpapers.rl._training import rl_step
from jaxpapers.rl._training import random_transcripts
from jaxpapers.rl._training import pretraining_mask
from jaxpapers.rl._training import warm_start_step
from jaxpapers.rl._training import evaluate as rl_evaluate
from jaxpapers.rl._training import warm_start_chunk
from jaxpapers.rl._training import MultiRun
from jaxpapers.rl._training import multi_run
from jaxpapers.rl._echo import echo_loss
from jaxpapers.rl._echo import echo_masks
from jaxpapers.rl._echo import EchoMasks
from jaxpapers.rl._echo import env_loss
from jaxpapers.rl._echo import lambda_schedule
from jaxpapers.rl._echo import token_log_probs
from jaxpapers.rl._echo import world_model_only
from jaxpapers.rl._grpo import grpo_advantages
from jaxpapers.rl._grpo import ppo_clip_loss

__all__ = [
    "N_OBS_EPSILON",
    "MASK_MODES",
    "SCHEDULES",
    "span_mask",
    "shift_for_next_token",
    "STD_EPSILON",
    "check_same_shape",
    "sequence_mean",
    "Cache",
    "init_cache",
    "rollout_decode",
    "rollout_sample",
    "rollout_sample_split",
    "SHELL_KEYS",
    "SHELL_NUM_KEYS",
    "SHELL_VALUE_MODULUS",
    "SHELL_EOT",
    "SHELL_VOCAB_SIZE",
    "SHELL_SCAFFOLDING",
    "SHELL_WARNING",
    "SHELL_WARNING_SEPARATOR",
    "ShellLayout",
    "Store",
    "Tasks",
    "Spans",
    "Transcripts",
    "shell_encode",
    "shell_decode",
    "encode_command",
    "shell_execute",
    "shell_observation",
    "shell_step",
    "shell_assemble",
    "spans_of",
    "shell_verify",
    "shell_scripted",
    "transcripts_of",
    "render_goal",
    "make_tasks",
    "command_table",
    "RLConfig",
    "rl_optimizer",
    "transcript_log_probs",
    "rl_loss",
    "rl_step",
    "random_transcripts",
    "pretraining_mask",
    "warm_start_step",
    "rl_evaluate",
    "warm_start_chunk",
    "MultiRun",
    "multi_run",
    "echo_loss",
    "echo_masks",
    "EchoMasks",
    "env_loss",
    "lambda_schedule",
    "token_log_probs",
    "world_model_only",
    "grpo_advantages",
    "ppo_clip_loss",
]

_deprecation.install(__name__)
