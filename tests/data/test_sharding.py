"""jaxpapers.data under Auto and Explicit meshes gives the unsharded numbers.

Every case runs jitted on inputs sharded along the batch ("data") and/or a
feature axis ("model") of a (2, 4) mesh (see tests/sharding_checks.py,
which traces every case): keys of a batch of draws, the data set sampled from, or
a token batch (along its batch and its sequence axis).
The host-side (numpy) split and windowing take device arrays too; they are
checked on sharded arrays eagerly below.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers import data
from jaxpapers.data import _multidomain as multidomain
from jaxpapers.data import _text as text
from tests import sharding_checks

_rng = np.random.default_rng(0)
_KEYS = jax.random.split(jax.random.key(0), 8)
_DATA = {"x": jnp.asarray(_rng.normal(size=(16, 8)), jnp.float32),
         "y": jnp.asarray(_rng.integers(0, 10, 16), jnp.int32)}
_DATA_SPECS = {"x": jax.P("data", "model"), "y": jax.P("data")}


def _token_batch():
  """Bytes with an EOS about every fourth token, and EOS where shards meet.

  EOS at the first position and on both sides of the sequence shards'
  boundaries (4 | 8 | 12), so that documents run across the shards.
  """
  tokens_BxL = np.where(_rng.uniform(size=(8, 16)) < 0.25, text.EOS,
                        _rng.integers(0, 256, (8, 16)))
  tokens_BxL[::2, [0, 3, 8]] = text.EOS
  tokens_BxL[1::2, [4, 11, 12]] = text.EOS
  return jnp.asarray(tokens_BxL, jnp.int32)


_TOKENS_BxL = _token_batch()
_STREAM = jnp.asarray(_rng.integers(0, text.VOCAB_SIZE, 64), jnp.int32)


def _segment_ids_both_ways(*token_batches):
  """Both EOS conventions on each (differently sharded) copy of a batch."""
  return [{eos: text.segment_ids(tokens, eos=eos)
           for eos in ("closes", "opens")} for tokens in token_batches]


CASES = {
    "data.advection_trajectory": (
        jax.vmap(functools.partial(data.advection_trajectory, num_steps=2,
                                   size=8, radius_range=(1.0, 3.0))),
        (_KEYS,), (jax.P("data"),)),
    "data.minibatch_indices": (
        jax.vmap(lambda key: data.minibatch_indices(key, 16, 4)), (_KEYS,),
        (jax.P("data"),)),
    # Indices sharded along both mesh axes, as the leaves' feature axis is.
    "data.take+data.minibatch_indices": (
        data.take,
        (_DATA, jnp.asarray([[3, 1, 4, 1], [5, 9, 2, 6]], jnp.int32)),
        (_DATA_SPECS, jax.P("data", "model"))),
    "data.take": (
        data.take, (_DATA, jnp.asarray([[3, 1, 4, 1], [5, 9, 2, 6]], jnp.int32)),
        (_DATA_SPECS, jax.P("data"))),
    "data.sample_minibatches": (
        lambda key, d: data.sample_minibatches(key, d, 4, 8),
        (jax.random.key(1), _DATA), (None, _DATA_SPECS)),
    # The batch sharded along "data", along the sequence ("model"), and both.
    "data.segment_ids": (
        _segment_ids_both_ways, (_TOKENS_BxL,) * 3,
        (jax.P("data"), jax.P(None, "model"), jax.P("data", "model"))),
    "data.sample_windows": (
        jax.vmap(lambda key, tokens: text.sample_windows(key, tokens, 4, 8),
                 in_axes=(0, None)),
        (_KEYS, _STREAM), (jax.P("data"), jax.P("model"))),
    "data.consecutive_windows": (
        lambda tokens: multidomain.consecutive_windows(tokens, 8, 5),
        (_STREAM,), (jax.P("data"),)),
}

NOT_SHARDED = {
    "data.advection_dataset": "takes a Python seed and count, no arrays",
    "data.load_digits": "loads scikit-learn's bundled files into numpy; takes"
                        " no arrays",
    "data.split_digits": "host-side numpy permutation of a Digits; takes no"
                         " device arrays",
    "data.load_series": "loads statsmodels' bundled files into numpy; takes no"
                        " arrays",
    "data.lorenz96": "generates a series from Python settings; takes no arrays",
    "data.chronological_split":
        "host-side numpy on concrete values (not jittable); checked on sharded"
        " device arrays by"
        " tests/data/test_sharding.py::test_host_functions_take_sharded_arrays",
    "data.sliding_windows":
        "host-side numpy on concrete values (not jittable); checked on sharded"
        " device arrays by"
        " tests/data/test_sharding.py::test_host_functions_take_sharded_arrays",
    "data.python_docs_documents": "returns the Python strings of"
                                       " pydoc_data.topics; takes no arrays",
    "data.python_source_documents": "reads the standard library's .py"
                                         " files into Python strings; takes"
                                         " a Python count, no arrays",
    "data.text_provenance": "formats a Python string from a name; takes no"
                            " arrays",
    "data.encode_documents": "packs Python strings into host numpy"
                                  " bytes; takes no arrays",
    "data.split_documents": "splits a list of Python strings with a"
                                 " Python seed; takes no arrays",
    "data.csv_texts": "returns the CSV text of statsmodels'"
                                  " bundled data sets; takes no arrays",
    "data.arithmetic_document": "writes a Python string from a"
                                            " host numpy Generator; takes no"
                                            " arrays",
    "data.chunk_texts": "cuts Python strings with a host numpy"
                                    " Generator; takes no arrays",
    "data.load_multidomain": "loads shipped files and generated"
                                         " text into Python strings; takes"
                                         " no arrays",
    "data.interleaved_tokens": "shuffles and packs Python strings"
                                           " into host numpy; takes no"
                                           " arrays",
}


# Also compared in value (which cases, and why: tests/README.md).
NUMERIC_CASES = {
    "data.consecutive_windows": ("Auto", "Explicit"),
}


(test_sharded_call_traces_like_the_unsharded_call,
 test_sharded_inputs_give_the_unsharded_numbers) = (
     sharding_checks.contract_tests(CASES, NUMERIC_CASES))


@pytest.mark.parametrize("mode", ["Auto", "Explicit"])
def test_host_functions_take_sharded_arrays(mode, contract_mesh):
  values = np.cumsum(_rng.normal(size=(40, 4)), axis=0).astype(np.float32)
  mesh = contract_mesh(mode)
  with jax.set_mesh(mesh):
    sharded = jax.device_put(jnp.asarray(values), jax.P("data", "model"))
    split = data.chronological_split(sharded)
    windows = data.sliding_windows(sharded, 4, 2, stride=3)
  expected = data.chronological_split(values)
  for got, want in zip(split, expected):
    np.testing.assert_array_equal(got, want)
  for got, want in zip(windows, data.sliding_windows(values, 4, 2, stride=3)):
    np.testing.assert_array_equal(got, want)
