"""jaxpapers.saddle: hyperparameter ranges are named errors at construction."""

import jax.numpy as jnp
import pytest

from jaxpapers import saddle

MISUSE = [
    (lambda: saddle.dm_sp(sigma=1.5), r"sigma must be > 0 and < 1.0"),
    (lambda: saddle.dm_sp(sigma=1.0), r"sigma must be > 0 and < 1.0"),
    (lambda: saddle.dm_sp(sigma=jnp.float32(0.0)), r"sigma must be > 0"),
    (lambda: saddle.dm_vip(tau=-0.1), r"tau must be"),
]


@pytest.mark.parametrize("index", range(len(MISUSE)))
def test_misuse_is_a_named_error(index):
  call, message = MISUSE[index]
  with pytest.raises(ValueError, match=message):
    call()


def test_the_documented_range_is_accepted():
  assert float(saddle.dm_sp(sigma=0.99).sigma) == pytest.approx(0.99)
