"""jaxpapers.models: a table of misuse, each a named error."""

import jax
import jax.numpy as jnp
import pytest

from jaxpapers import models

MISUSE = [
    # Integer weights would round the He-normal draws to zero.
    (lambda: models.init_mlp(jax.random.key(0), (3, 4), dtype=jnp.int32),
     TypeError, "dtype must be a real floating dtype, got int32"),
    (lambda: models.init_mlp(jax.random.key(0), (3,)), ValueError,
     "at least an input and an output width"),
    (lambda: models.init_mlp(jax.random.key(0), (3, 0, 2)), ValueError,
     "all >= 1"),
]


@pytest.mark.parametrize("index", range(len(MISUSE)))
def test_misuse_is_a_named_error(index):
  call, error, message = MISUSE[index]
  with pytest.raises(error, match=message):
    call()
