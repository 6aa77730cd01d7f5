r"""PPO for DynamAuction: a generic deep-RL baseline, in JAX with optax.

An MLP policy maps the observation (time of day, myopic valuation, kernel,
exposure, win count, time since the last win) to a Gaussian over a logit
:math:`u`; the action is the shading :math:`\theta = \theta_{max}\sigma(u)`
of the myopic bid, the same action space as MPC. A separate MLP estimates
the value. Training is clipped-surrogate PPO (Schulman et al., 2017) with
GAE (Schulman et al., 2016) on ``num_envs`` parallel episodes per
iteration, learning from the rewards the buyer *sees* (revealed values
minus payments, so delayed feedback is part of the problem), with
``optax.chain(clip_by_global_norm(0.5), adam(3e-4))``.

**Reconstruction**: DynamAuction's abstract reports that MPC beats PPO, SAC
and TD3; their architecture and budget are not available. Ours is a small
CPU budget (see ``docs/dynamauction.md``); the evaluation policy is the
Gaussian's mean.

Example::

  env_params = environment.EnvParams()
  trained, curve = train(jax.random.key(0), env_params, PPOConfig())
  policy = greedy_policy(trained, env_params, PPOConfig())

References:
  Schulman et al., *Proximal Policy Optimization Algorithms* (2017),
  https://arxiv.org/abs/1707.06347; Schulman et al., *High-Dimensional
  Continuous Control Using Generalized Advantage Estimation* (2016),
  https://arxiv.org/abs/1506.02438.
"""

import dataclasses
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxpapers import models
from jaxpapers import tree
from jaxpapers import _checks
from jaxpapers.auctions import _environment as env_lib
from jaxpapers.auctions import _myopic as myopic

NUM_FEATURES = 7


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class PPOConfig:
  """PPO hyperparameters (static); validated at construction.

  Counts are ints >= 1 (``hidden``: a sequence of layer widths, stored as a
  tuple); every float is finite, ``max_theta > 1`` (the policy starts at
  :math:`\\theta = 1`). ``max_grad_norm`` and ``clip`` may also be ``inf``
  (no clipping).
  """

  hidden: tuple[int, ...] = (64, 64)
  num_envs: int = 16
  num_iterations: int = 40
  epochs: int = 4
  minibatches: int = 8
  learning_rate: float = 3e-4
  max_grad_norm: float = 0.5
  clip: float = 0.2
  gamma: float = 0.999
  gae_lambda: float = 0.95
  value_coef: float = 0.5
  entropy_coef: float = 0.0
  init_log_std: float = -0.5
  max_theta: float = 1.5

  def __post_init__(self):
    if isinstance(self.hidden, (str, bytes)) or not hasattr(self.hidden,
                                                            "__iter__"):
      raise TypeError(f"hidden must be a sequence of layer widths; got"
                      f" {self.hidden!r}.")
    object.__setattr__(self, "hidden", tuple(
        _checks.check_int(f"hidden[{i}]", h, 1)
        for i, h in enumerate(self.hidden)))
    for name in ("num_envs", "num_iterations", "epochs", "minibatches"):
      object.__setattr__(self, name,
                         _checks.check_int(name, getattr(self, name), 1))
    # Checked numbers are stored as Python values: the config is a static
    # (hashed) argument.
    real = lambda name, **bounds: object.__setattr__(
        self, name, _checks.check_real(name, getattr(self, name), **bounds))
    real("learning_rate", low=0, low_open=True)
    real("max_theta", low=1, low_open=True,
         why=" (the policy starts at theta = 1, myopic bidding)")
    for name in ("max_grad_norm", "clip"):
      # inf is a valid "no clipping"; NaN or <= 0 is not.
      if getattr(self, name) != math.inf:
        real(name, low=0, low_open=True, why=" (or inf: no clipping)")
    for name in ("gamma", "gae_lambda"):
      real(name, low=0, high=1)
    real("value_coef", low=0)
    for name in ("entropy_coef", "init_log_std"):
      real(name)


def _check_config(config) -> None:
  if not isinstance(config, PPOConfig):
    raise TypeError(f"config must be a PPOConfig; got {type(config).__name__}.")


class PPOParams(NamedTuple):
  """Gaussian policy over the shading logit u, and the value function.

  Attributes:
    policy: MLP ``[..., NUM_FEATURES] -> [..., 1]``, the mean of u.
    value: MLP ``[..., NUM_FEATURES] -> [..., 1]``, the state value V(s).
    log_std: scalar log standard deviation of u.
  """

  policy: models.MLPParams
  value: models.MLPParams
  log_std: jax.Array


def features(obs: env_lib.Observation, params: env_lib.EnvParams) -> jax.Array:
  """The policy's inputs, ``[..., NUM_FEATURES]``, each of order one."""
  nu = myopic.myopic_valuation(obs, params)
  since = obs.time - obs.context.last_win
  columns = [
      obs.time / params.horizon, nu, obs.kernel,
      jnp.log1p(env_lib.exposure(obs.context, obs.time, params)),
      obs.context.count / 100.0,
      jnp.minimum(since, 5.0) / 5.0,  # +inf before the first win: 1
      obs.valid.astype(jnp.float32),
  ]
  # Not jnp.stack: vmapped over a batch sharded along an Explicit axis
  # (seeds), an episode loop first traces its body with the carries that
  # start as constants (the win count) unbatched; stack's batching rule
  # broadcasts such a column replicated and then refuses the mixed
  # shardings, while concatenate's gives it the batch's sharding.
  return jnp.concatenate([column[..., None] for column in columns], -1)


def init(key: jax.Array, config: PPOConfig) -> PPOParams:
  r"""He-initialised policy and value MLPs; the policy starts at myopic bidding.

  The last policy layer is scaled by 0.01 and its bias set to
  :math:`\mathrm{logit}(1/\theta_{max})`, so that
  :func:`shading` gives :math:`\theta \approx 1` (bid the myopic valuation)
  for every input before training.
  """
  _check_config(config)
  policy_key, value_key = jax.random.split(key)
  sizes = (NUM_FEATURES, *config.hidden, 1)
  policy = models.init_mlp(policy_key, sizes, init_scale=0.5)
  # Start near myopic bidding: theta = max_theta * sigmoid(u) = 1 at the bias.
  bias = math.log(1.0 / (config.max_theta - 1.0))
  policy = [*policy[:-1], {"w": policy[-1]["w"] * 0.01,
                           "b": jnp.full_like(policy[-1]["b"], bias)}]
  return PPOParams(policy, models.init_mlp(value_key, sizes),
                   jnp.float32(config.init_log_std))


def shading(u: jax.Array, config: PPOConfig) -> jax.Array:
  r"""The shading multiplier :math:`\theta = \theta_{max}\,\sigma(u)` of a logit u (any shape)."""
  return config.max_theta * jax.nn.sigmoid(u)


def _gaussian_log_prob(u, mean, log_std):
  return -0.5 * ((u - mean) / jnp.exp(log_std)) ** 2 - log_std - 0.5 * math.log(
      2 * math.pi)


def greedy_policy(ppo_params: PPOParams, params: env_lib.EnvParams,
                  config: PPOConfig) -> myopic.Policy:
  """The evaluation policy: the shading at the Gaussian's mean."""
  env_lib.check_params(params)
  _check_config(config)
  def policy(obs):
    mean = models.apply_mlp(ppo_params.policy, features(obs, params))[..., 0]
    nu = myopic.myopic_valuation(obs, params)
    return shading(mean, config) * myopic.myopic_bid(nu, obs.time, params)
  return policy


class PPOBatch(NamedTuple):
  """One PPO rollout batch, ``[envs, slots, ...]``, with GAE advantages and value targets."""

  features: jax.Array  # [envs, slots, F]
  action: jax.Array  # the logit u
  log_prob: jax.Array
  advantage: jax.Array
  target: jax.Array  # value target
  active: jax.Array  # a valid arrival (the rest is padding)


def collect(key: jax.Array, ppo_params: PPOParams, params: env_lib.EnvParams,
            config: PPOConfig) -> tuple[PPOBatch, jax.Array]:
  """``num_envs`` episodes of the sampling policy; returns the batch and returns."""
  def episode(k):
    reset_key, action_key = jax.random.split(k)
    obs, state = env_lib.reset(reset_key, params)
    slots = state.arrivals.time.shape[0]

    def body(carry, step_key):
      obs, state = carry
      x = features(obs, params)
      mean = models.apply_mlp(ppo_params.policy, x)[0]
      u = mean + jnp.exp(ppo_params.log_std) * jax.random.normal(step_key)
      nu = myopic.myopic_valuation(obs, params)
      bid = shading(u, config) * myopic.myopic_bid(nu, obs.time, params)
      new_obs, state, reward, _, _ = env_lib.step(step_key, state, bid, params)
      value = models.apply_mlp(ppo_params.value, x)[0]
      return (new_obs, state), (x, u, _gaussian_log_prob(u, mean, ppo_params.log_std),
                                reward, value, obs.valid)

    # Steps past the valid arrivals are not run: their outputs are zeros,
    # inactive, as GAE and the loss treat them.
    (_, state), out = env_lib.scan_episode(body, obs, state,
                                           jax.random.split(action_key, slots))
    return out, state.utility

  (x, u, log_prob, reward, value, active), returns = jax.vmap(episode)(
      jax.random.split(key, config.num_envs))
  advantage = _gae(reward, value, active, config)
  return PPOBatch(x, u, log_prob, advantage, advantage + value, active), returns


def _gae(reward, value, active, config):
  """Generalised advantage estimates along axis 1; zero past the episode end."""
  next_value = jnp.concatenate([value[:, 1:], jnp.zeros_like(value[:, :1])], 1)
  next_active = jnp.concatenate([active[:, 1:], jnp.zeros_like(active[:, :1])],
                                1).astype(jnp.float32)
  delta = reward + config.gamma * next_value * next_active - value

  def back(carry, slot):
    d, a_next, a = slot
    adv = jnp.where(a, d + config.gamma * config.gae_lambda * a_next * carry, 0.0)
    return adv, adv

  _, adv = jax.lax.scan(back, jnp.zeros(reward.shape[0]),
                        (delta.T, next_active.T, active.T), reverse=True)
  return adv.T


def loss(ppo_params: PPOParams, batch: PPOBatch, config: PPOConfig) -> jax.Array:
  """Clipped surrogate + value loss - entropy bonus, over active steps."""
  mean = models.apply_mlp(ppo_params.policy, batch.features)[..., 0]
  log_prob = _gaussian_log_prob(batch.action, mean, ppo_params.log_std)
  weight = batch.active.astype(jnp.float32)
  count = jnp.maximum(jnp.sum(weight), 1.0)
  adv_mean = jnp.sum(batch.advantage * weight) / count
  adv_std = jnp.sqrt(jnp.sum((batch.advantage - adv_mean) ** 2 * weight) / count)
  advantage = (batch.advantage - adv_mean) / (adv_std + 1e-8)
  ratio = jnp.exp(log_prob - batch.log_prob)
  surrogate = jnp.minimum(
      ratio * advantage,
      jnp.clip(ratio, 1 - config.clip, 1 + config.clip) * advantage)
  value = models.apply_mlp(ppo_params.value, batch.features)[..., 0]
  value_loss = (value - batch.target) ** 2
  entropy = ppo_params.log_std + 0.5 * math.log(2 * math.pi * math.e)
  per_step = -surrogate + config.value_coef * value_loss
  return jnp.sum(per_step * weight) / count - config.entropy_coef * entropy


def optimizer(config: PPOConfig) -> optax.GradientTransformation:
  """Adam after global-norm clipping (``max_grad_norm``), as in common PPO settings."""
  return optax.chain(optax.clip_by_global_norm(config.max_grad_norm),
                     optax.adam(config.learning_rate))


def train(key: jax.Array, params: env_lib.EnvParams, config: PPOConfig
          ) -> tuple[PPOParams, jax.Array]:
  """PPO for ``num_iterations``; returns the params and the mean return per iteration."""
  env_lib.check_params(params)
  _check_config(config)
  init_key, train_key = jax.random.split(key)
  ppo_params = init(init_key, config)
  tx = optimizer(config)

  def iteration(carry, k):
    ppo_params, opt_state = carry
    collect_key, shuffle_key = jax.random.split(k)
    batch, returns = collect(collect_key, ppo_params, params, config)
    # Minibatches of whole episodes keep each GAE sequence intact.
    per_minibatch = max(1, config.num_envs // config.minibatches)

    def epoch(carry, ek):
      order = jax.random.permutation(ek, config.num_envs)
      groups = order[:per_minibatch * (config.num_envs // per_minibatch)]
      groups = groups.reshape(-1, per_minibatch)

      def minibatch(carry, idx):
        ppo_params, opt_state = carry
        sub = jax.tree.map(lambda x: x[idx], batch)
        grads = jax.grad(loss)(ppo_params, sub, config)
        updates, opt_state = tx.update(grads, opt_state, ppo_params)
        return (optax.apply_updates(ppo_params, updates), opt_state), None

      return jax.lax.scan(minibatch, carry, groups)[0], None

    carry, _ = jax.lax.scan(epoch, (ppo_params, opt_state),
                            jax.random.split(shuffle_key, config.epochs))
    return carry, jnp.mean(returns)

  # The optimiser's step count is a scalar constant (see
  # tree.on_context_mesh).
  (ppo_params, _), curve = jax.lax.scan(
      iteration, tree.on_context_mesh((ppo_params, tx.init(ppo_params))),
      jax.random.split(train_key, config.num_iterations))
  return ppo_params, curve
