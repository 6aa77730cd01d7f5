"""jaxpapers.auctions under Auto and Explicit meshes gives the unsharded numbers.

Episodes are vmapped (the environment's documented batching) over keys and
bids sharded along the mesh's data axis.
"""

import jax
import jax.numpy as jnp
import pytest

from jaxpapers import auctions

_PARAMS = auctions.EnvParams(format="first", horizon=2.0, base_intensity=3.0)
_NUM_STEPS = 3


def _episodes(keys, shading_B):
  """Resets a batch of episodes and bids a shaded value for a few steps."""
  def one(key, shading):
    obs, state = auctions.reset(key, _PARAMS)
    rewards = []
    for _ in range(_NUM_STEPS):
      obs, state, reward, done, info = auctions.step(
          key, state, shading * obs.value * obs.kernel, _PARAMS)
      rewards.append(reward)
    return obs, state, jnp.stack(rewards), done, info
  return jax.vmap(one)(keys, shading_B)


CASES = {
    "auctions.reset+auctions.step": (
        _episodes, (jax.random.split(jax.random.key(0), 8),
                    jnp.linspace(0.2, 1.0, 8)),
        (jax.P("data"), jax.P("data"))),
}

NOT_SHARDED = {
    "auctions.EnvParams": "a static config dataclass of Python numbers,"
                          " validated at construction",
    "auctions.MPCConfig": "a static config dataclass of Python numbers,"
                          " validated at construction",
}


# The cases that took 2.5 s or more for both modes on 2 idle cores (nearly all
# of it compilation) run in the slow suite, `pytest -m slow`, which CI runs.
SLOW_CASES = {
    "auctions.reset+auctions.step",
}


@pytest.mark.parametrize("mode", ["Auto", "Explicit"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_sharded_inputs_give_the_unsharded_numbers(name, mode,
                                                   check_sharded_call):
  check_sharded_call(CASES[name], mode)
