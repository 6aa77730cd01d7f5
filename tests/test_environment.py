"""The test environment itself: fail loudly if sharding tests would test one device."""

import jax
import jax.numpy as jnp
import pytest


def test_eight_virtual_cpu_devices():
  assert jax.device_count() == 8


def test_strict_dtype_promotion_is_on():
  with pytest.raises(Exception, match="promot"):
    jnp.ones(2, jnp.float32) + jnp.ones(2, jnp.int32)
