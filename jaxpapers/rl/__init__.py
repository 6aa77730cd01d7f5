"""Agent RL on byte transcripts: GRPO, ECHO's environment cross-entropy, a toy shell."""

from jaxpapers.rl import echo
from jaxpapers.rl import grpo
from jaxpapers.rl import rollout
from jaxpapers.rl import shell
from jaxpapers.rl import training
from jaxpapers.rl.echo import echo_loss
from jaxpapers.rl.echo import echo_masks
from jaxpapers.rl.echo import EchoMasks
from jaxpapers.rl.echo import env_loss
from jaxpapers.rl.echo import lambda_schedule
from jaxpapers.rl.echo import token_log_probs
from jaxpapers.rl.echo import world_model_only
from jaxpapers.rl.grpo import grpo_advantages
from jaxpapers.rl.grpo import ppo_clip_loss
