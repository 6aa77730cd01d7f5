"""The multi-domain corpus: generated arithmetic, chunking, splits, packing."""

import numpy as np
import pytest

from jaxpapers.data import _multidomain as multidomain
from jaxpapers.data import _text as text


@pytest.fixture(scope="module")
def corpus():
  return multidomain.load_multidomain(docs_per_domain=30, seed=3)


def test_arithmetic_lines_are_correct():
  doc = multidomain.arithmetic_document(np.random.default_rng(0), 2000)
  assert len(doc) == 2000
  lines = doc.split("\n")[:-1]  # the last line may be cut
  assert len(lines) > 100
  for line in lines:
    lhs, rhs = line.split("=")
    op = next(c for c in "+-*" if c in lhs)
    a, b = (int(v) for v in lhs.split(op))
    assert int(rhs) == {"+": a + b, "-": a - b, "*": a * b}[op]


def test_chunks_are_consecutive_pieces_within_bounds():
  texts = ["a" * 1000 + "b" * 3000, "c" * 100, "d" * 900]
  chunks = multidomain.chunk_texts(texts, np.random.default_rng(1),
                                   min_chars=200, max_chars=700,
                                   max_chunks_per_text=3)
  assert all(200 <= len(c) <= 700 for c in chunks[:3])
  assert "".join(chunks[:3]) == texts[0][:sum(map(len, chunks[:3]))]
  assert not any(c.startswith("c") for c in chunks)  # shorter than min_chars
  assert all(c[0] == "d" for c in chunks[3:]) and chunks[3:]
  with pytest.raises(ValueError, match="min_chars <= max_chars"):
    multidomain.chunk_texts(texts, np.random.default_rng(1), min_chars=10,
                            max_chars=5, max_chunks_per_text=1)


def test_domains_split_and_reproduce(corpus):
  assert corpus.domains == ("code", "prose", "arithmetic", "csv")
  for domain, train, valid in zip(corpus.domains, corpus.train, corpus.valid):
    assert len(train) == 27 and len(valid) == 3, domain
    assert not set(train) & set(valid)
    assert all(len(d) <= 2048 for d in train + valid)
  sources = {"code": "\0".join(text.python_source_documents()),
             "prose": "\0".join(text.python_docs_documents()),
             "csv": "\0".join(multidomain.csv_texts())}
  for index, domain in enumerate(corpus.domains):
    if domain in sources:
      assert all(d in sources[domain] for d in corpus.train[index]), domain
  assert all(d.count(",") > 5 for d in corpus.train[3])  # CSV rows
  again = multidomain.load_multidomain(docs_per_domain=30, seed=3)
  assert again.train == corpus.train and again.valid == corpus.valid
  other = multidomain.load_multidomain(docs_per_domain=30, seed=4)
  assert other.train[0] != corpus.train[0]


def test_packing_and_windows(corpus):
  tokens = multidomain.interleaved_tokens(corpus.train, seed=0)
  assert np.sum(tokens == text.EOS) == sum(len(d) for d in corpus.train)
  assert tokens[-1] == text.EOS
  windows = multidomain.consecutive_windows(tokens, 64, max_windows=5)
  assert windows.shape == (5, 65)
  np.testing.assert_array_equal(windows[1:, 0], windows[:-1, -1])
  np.testing.assert_array_equal(windows.reshape(-1)[:65], tokens[:65])
  with pytest.raises(ValueError, match="fewer than one window"):
    multidomain.consecutive_windows(tokens[:10], 64)
