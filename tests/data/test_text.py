"""Byte-level text corpora shipped with Python."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxpapers.data import _text as text


def test_encode_appends_eos_and_roundtrips():
  tokens = text.encode_documents(["ab", "é"])
  assert tokens.tolist() == [97, 98, text.EOS, 0xC3, 0xA9, text.EOS]


def test_segment_ids_count_documents():
  tokens = jnp.array([[1, text.EOS, 2, 3, text.EOS, 4]])
  np.testing.assert_array_equal(text.segment_ids(tokens), [[0, 0, 1, 1, 1, 2]])


def test_segment_ids_with_the_authors_convention_start_a_document_at_eos():
  tokens = jnp.array([[1, text.EOS, 2, 3, text.EOS, 4]])
  np.testing.assert_array_equal(text.segment_ids(tokens, eos="opens"),
                                [[0, 1, 1, 1, 2, 2]])
  # Either way each EOS sits at a document boundary: the conventions differ
  # exactly at the EOS positions.
  closes, opens = text.segment_ids(tokens), text.segment_ids(tokens, eos="opens")
  np.testing.assert_array_equal(np.asarray(opens != closes),
                                np.asarray(tokens == text.EOS))
  with pytest.raises(ValueError, match="eos must be one of"):
    text.segment_ids(tokens, eos="between")


def test_split_is_fixed_disjoint_and_complete():
  docs = [f"doc{i}" for i in range(20)]
  train, valid = text.split_documents(docs, 0.25, seed=1)
  assert len(valid) == 5 and sorted(train + valid) == sorted(docs)
  assert text.split_documents(docs, 0.25, seed=1) == (train, valid)


def test_corpora_ship_with_python():
  docs = text.python_docs_documents()
  assert len(docs) > 50 and sum(map(len, docs)) > 100_000
  source = text.python_source_documents(max_files=5)
  assert len(source) == 5 and all(s for s in source)


def test_windows_are_slices_of_the_stream():
  tokens = jnp.arange(100, dtype=jnp.int32)
  windows = text.sample_windows(jax.random.key(0), tokens, 4, 9)
  assert windows.shape == (4, 10)
  np.testing.assert_array_equal(np.diff(np.asarray(windows), axis=1), 1)
  with pytest.raises(ValueError, match="fewer than a window"):
    text.sample_windows(jax.random.key(0), tokens[:5], 1, 9)
