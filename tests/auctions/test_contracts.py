"""jaxpapers.auctions: a table of misuse, each a named error."""

import jax
import jax.numpy as jnp
import pytest

from jaxpapers import auctions

_PARAMS = auctions.EnvParams(horizon=2.0, base_intensity=3.0)
_OBS, _STATE = auctions.reset(jax.random.key(0), _PARAMS)

MISUSE = [
    # A batch of bids used to broadcast through one episode's state.
    (lambda: auctions.step(jax.random.key(1), _STATE, jnp.ones(3), _PARAMS),
     ValueError, "action must be one real bid"),
    (lambda: auctions.step(jax.random.key(1), _STATE, jnp.complex64(1), _PARAMS),
     ValueError, "action must be one real bid"),
    (lambda: auctions.step(jax.random.key(1), _STATE, 1.0,
                           auctions.EnvParams(horizon=4.0, base_intensity=3.0)),
     ValueError, "pass the params the state was reset with"),
    (lambda: auctions.EnvParams(format="third"), ValueError,
     "format must be one of"),
    (lambda: auctions.EnvParams(intensity_amplitude=1.5), ValueError,
     r"intensity_amplitude must be in \[0, 1\]"),
    (lambda: auctions.EnvParams(reserve=-1.0), ValueError, "reserve must be in"),
    (lambda: auctions.EnvParams(mean_delay=0.0), ValueError,
     "mean_delay must be > 0"),
    (lambda: auctions.MPCConfig(planner="random"), ValueError,
     "planner must be one of"),
    (lambda: auctions.MPCConfig(cem_elites=65), ValueError,
     "cem_elites=65 must be <= cem_samples=64"),
    (lambda: auctions.MPCConfig(thetas=()), ValueError,
     "thetas must be non-empty"),
]


@pytest.mark.parametrize("index", range(len(MISUSE)))
def test_misuse_is_a_named_error(index):
  call, error, message = MISUSE[index]
  with pytest.raises(error, match=message):
    call()
