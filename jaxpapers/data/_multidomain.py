"""A multi-domain byte-level corpus from data that ships or is generated.

Four domains, the data of our CPU-scale EMO study (``docs/emo.md``):

* ``code``: the standard library's ``.py`` files (:mod:`jaxpapers.data._text`);
* ``prose``: Python's documentation topics (``pydoc_data.topics``);
* ``arithmetic``: generated lines such as ``417+86=503``;
* ``csv``: ``load_pandas().data.to_csv()`` of every ``statsmodels.datasets``
  data set that has ``load_pandas`` (shipped inside statsmodels; never
  ``get_rdataset`` / ``webuse``, which download).

Texts are cut into documents of ``min_chars..max_chars`` characters, at most
``max_chunks_per_text`` per source text (so no single file or data set
dominates a domain), shuffled with the seed and capped at
``docs_per_domain``; every ``valid_every``-th document of a domain is held
out. Documents are packed as UTF-8 bytes, each followed by ``EOS``
(:func:`jaxpapers.data.encode_documents`).
"""

import importlib
import pkgutil
import sys
from typing import NamedTuple
import warnings

import numpy as np

from jaxpapers import tree
from jaxpapers._checks import check_int
from jaxpapers.data import _text as text

DOMAINS = ("code", "prose", "arithmetic", "csv")


class MultiDomainCorpus(NamedTuple):
  """Documents per domain (same order as ``domains``), split into train / valid."""

  domains: tuple[str, ...]
  train: tuple[list[str], ...]
  valid: tuple[list[str], ...]
  provenance: str


def csv_texts() -> list[str]:
  """CSV text of each statsmodels data set with ``load_pandas``, sorted by name."""
  import statsmodels.datasets  # pylint: disable=g-import-not-at-top
  texts = []
  for info in sorted(pkgutil.iter_modules(statsmodels.datasets.__path__),
                     key=lambda m: m.name):
    if not info.ispkg:
      continue
    module = importlib.import_module(f"statsmodels.datasets.{info.name}")
    if hasattr(module, "load_pandas"):
      with warnings.catch_warnings():
        # pandas deprecation chatter inside statsmodels' own loaders.
        warnings.simplefilter("ignore", FutureWarning)
        texts.append(module.load_pandas().data.to_csv())
  return texts


def arithmetic_document(rng: np.random.Generator, num_chars: int) -> str:
  """Lines ``a+b=c``, ``a-b=c`` (a, b < 1000) and ``a*b=c`` (a, b < 100).

  ``num_chars`` must be an int >= 1 (``ValueError``).
  """
  check_int("num_chars", num_chars, 1)
  lines, size = [], 0
  while size < num_chars:
    op = "+-*"[rng.integers(3)]
    high = 100 if op == "*" else 1000
    a, b = (int(v) for v in rng.integers(0, high, 2))
    value = a + b if op == "+" else a - b if op == "-" else a * b
    lines.append(f"{a}{op}{b}={value}\n")
    size += len(lines[-1])
  return "".join(lines)[:num_chars]


def chunk_texts(texts: list[str], rng: np.random.Generator, *, min_chars: int,
                max_chars: int, max_chunks_per_text: int) -> list[str]:
  """Consecutive chunks of ``min_chars..max_chars`` characters of each text.

  Raises:
    ValueError: unless ``0 < min_chars <= max_chars`` and
      ``max_chunks_per_text >= 1`` are ints.
  """
  check_int("min_chars", min_chars, 1)
  check_int("max_chars", max_chars, 1)
  check_int("max_chunks_per_text", max_chunks_per_text, 1)
  if not 0 < min_chars <= max_chars:
    raise ValueError(
        f"need 0 < min_chars <= max_chars, got {min_chars}, {max_chars}."
    )
  chunks = []
  for t in texts:
    start = 0
    for _ in range(max_chunks_per_text):
      size = int(rng.integers(min_chars, max_chars + 1))
      if start + min_chars > len(t):
        break
      chunks.append(t[start:start + size])
      start += size
  return chunks


def load_multidomain(*, docs_per_domain: int = 240, min_chars: int = 256,
                     max_chars: int = 2048, max_chunks_per_text: int = 16,
                     valid_every: int = 10, seed: int = 0) -> MultiDomainCorpus:
  """The four domains as documents, split into train and validation.

  Args:
    docs_per_domain: documents kept per domain (fewer if a domain runs out).
    min_chars: shortest document.
    max_chars: longest document.
    max_chunks_per_text: documents cut from one source text at most.
    valid_every: every ``valid_every``-th document of a domain is held out.
    seed: chunk sizes, shuffling and the arithmetic.

  Returns:
    A :class:`MultiDomainCorpus`.

  Raises:
    ValueError: a count that is not an int in its range (``docs_per_domain
      >= 1``, ``valid_every >= 2``, ``seed >= 0``, the chunk sizes of
      :func:`chunk_texts`).
  """
  check_int("docs_per_domain", docs_per_domain, 1)
  check_int("valid_every", valid_every, 2)
  check_int("seed", seed, 0)
  # Before the (slow) sources are read.
  chunk_texts([], np.random.default_rng(0), min_chars=min_chars,
              max_chars=max_chars, max_chunks_per_text=max_chunks_per_text)
  rng = np.random.default_rng(seed)
  sources = {
      "code": text.python_source_documents(),
      "prose": text.python_docs_documents(),
      "arithmetic": [arithmetic_document(rng, max_chars)
                     for _ in range(docs_per_domain)],
      "csv": csv_texts(),
  }
  train, valid = [], []
  for domain in DOMAINS:
    chunks = chunk_texts(sources[domain], rng, min_chars=min_chars,
                         max_chars=max_chars,
                         max_chunks_per_text=max_chunks_per_text)
    order = rng.permutation(len(chunks))[:docs_per_domain]
    docs = [chunks[i] for i in order]
    valid.append(docs[valid_every - 1::valid_every])
    train.append([d for i, d in enumerate(docs)
                  if i % valid_every != valid_every - 1])
  provenance = (
      f"CPython {sys.version.split()[0]} standard library and pydoc topics,"
      " statsmodels.datasets CSV, generated arithmetic; documents of"
      f" {min_chars}-{max_chars} chars, UTF-8 bytes + EOS"
  )
  return MultiDomainCorpus(DOMAINS, tuple(train), tuple(valid), provenance)


def interleaved_tokens(documents_per_domain: tuple[list[str], ...],
                       seed: int = 0) -> np.ndarray:
  """All domains' documents in one shuffled order, packed with ``EOS``."""
  docs = [d for domain_docs in documents_per_domain for d in domain_docs]
  order = np.random.default_rng(seed).permutation(len(docs))
  return text.encode_documents([docs[i] for i in order])


def consecutive_windows(tokens: np.ndarray, length: int,
                        max_windows: int | None = None) -> np.ndarray:
  """Non-overlapping windows of ``length + 1`` tokens from the start: ``(N, length + 1)``.

  Window i covers ``tokens[i*length : i*length + length + 1]``, so every
  token after the first is predicted exactly once.

  Raises:
    ValueError: ``tokens`` not 1-D, ``length`` not an int >= 1,
      ``max_windows`` neither None nor an int >= 1, or no whole window.
  """
  if len(np.shape(tokens)) != 1:
    raise ValueError(f"tokens must be 1-D; got shape {np.shape(tokens)}.")
  check_int("length", length, 1)
  if max_windows is not None:
    check_int("max_windows", max_windows, 1)
  count = (tokens.shape[0] - 1) // length
  if max_windows is not None:
    count = min(count, max_windows)
  if count < 1:
    raise ValueError(
        f"tokens has {tokens.shape[0]} entries, fewer than one window of"
        f" {length + 1}."
    )
  starts = np.arange(count) * length
  # Device tokens sharded along Explicit mesh axes are gathered first: the
  # windows overlap, so no sharding of the stream carries over to them.
  tokens = tree.gather_explicit(tokens)[0]
  return tokens[starts[:, None] + np.arange(length + 1)[None, :]]
