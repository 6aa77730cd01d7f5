"""The token check of :mod:`jaxpapers.rl`; scalar checks are in :mod:`jaxpapers._checks`."""

import jax.numpy as jnp


def check_integer_tokens(name: str, tokens) -> None:
  """Raises ``TypeError`` unless ``tokens`` has an integer dtype.

  (A float array would be truncated to token ids silently.)
  """
  dtype = jnp.result_type(tokens)
  if not jnp.issubdtype(dtype, jnp.integer):
    raise TypeError(f"{name} must hold integer tokens; got dtype {dtype}.")
