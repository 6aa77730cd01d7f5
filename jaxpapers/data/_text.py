"""Byte-level text that ships with Python itself, packed for language modelling.

Two corpora need no download: the prose of Python's documentation topics
(``pydoc_data.topics``, what ``help()`` shows) and the standard library's own
source files. Documents are UTF-8 bytes (tokens 0..255) each followed by
``EOS = 256``; the vocabulary has 257 tokens. Their exact content depends on
the Python version, which the provenance string records.
"""

import os
import sys
import sysconfig

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers import tree
from jaxpapers._checks import check_int

EOS = 256
VOCAB_SIZE = 257


def python_docs_documents() -> list[str]:
  """The documentation topics of ``help()``, one document per topic, sorted by name."""
  from pydoc_data import topics  # pylint: disable=g-import-not-at-top
  return [topics.topics[name] for name in sorted(topics.topics)]


def python_source_documents(max_files: int | None = None) -> list[str]:
  """Standard-library ``.py`` files (no tests, no site-packages), sorted by path."""
  root = sysconfig.get_paths()["stdlib"]
  paths = []
  for directory, subdirs, files in os.walk(root):
    subdirs[:] = sorted(d for d in subdirs
                        if d not in ("test", "tests", "idle_test", "site-packages",
                                     "__pycache__"))
    paths += [os.path.join(directory, f) for f in sorted(files) if f.endswith(".py")]
  paths = sorted(paths)[:max_files]
  docs = []
  for path in paths:
    with open(path, encoding="utf-8", errors="replace") as f:
      docs.append(f.read())
  return docs


def provenance(name: str) -> str:
  return (f"{name} from CPython {sys.version.split()[0]}'s own files"
          " (pydoc_data.topics / the standard library), UTF-8 bytes + EOS")


def encode_documents(docs: list[str]) -> np.ndarray:
  """Concatenates documents as int32 bytes, each followed by ``EOS``."""
  if not docs:
    raise ValueError("docs is empty: nothing to encode.")
  parts = []
  for doc in docs:
    parts.append(np.frombuffer(doc.encode("utf-8"), np.uint8).astype(np.int32))
    parts.append(np.array([EOS], np.int32))
  return np.concatenate(parts)


def split_documents(docs: list[str], valid_fraction: float,
                    seed: int = 0) -> tuple[list[str], list[str]]:
  """A fixed random split of whole documents into (train, validation).

  Raises:
    ValueError: fewer than two documents (both sides need one), or
      ``valid_fraction`` outside ``(0, 1)``.
  """
  if len(docs) < 2:
    raise ValueError(
        f"docs must hold at least 2 documents to split; got {len(docs)}.")
  if not 0.0 < valid_fraction < 1.0:
    raise ValueError(f"valid_fraction must lie in (0, 1), got {valid_fraction}.")
  order = np.random.default_rng(seed).permutation(len(docs))
  num_valid = min(max(1, int(round(valid_fraction * len(docs)))),
                  len(docs) - 1)
  valid = sorted(order[:num_valid])
  train = sorted(order[num_valid:])
  return [docs[i] for i in train], [docs[i] for i in valid]


_EOS_CONVENTIONS = ("closes", "opens")


def segment_ids(tokens_BxL: jax.Array, *, eos: str = "closes") -> jax.Array:
  """Document index of each position, counted from the ``EOS`` tokens.

  Args:
    tokens_BxL: token ids (any leading shape; documents run along the last
      axis).
    eos: ``"closes"`` (default, what our EMO experiment uses): an ``EOS``
      belongs to the document it ends, so the index is the number of ``EOS``
      strictly before the position. ``"opens"``: an ``EOS`` starts the next
      document, as in the EMO authors' models (the count includes it).

  Returns:
    int32 document indices shaped like ``tokens_BxL``.

  Example:
    >>> import jax.numpy as jnp
    >>> tokens = jnp.array([5, EOS, 7, 8])
    >>> segment_ids(tokens).tolist(), segment_ids(tokens, eos="opens").tolist()
    ([0, 0, 1, 1], [0, 1, 1, 1])
  """
  if eos not in _EOS_CONVENTIONS:
    raise ValueError(f"eos must be one of {_EOS_CONVENTIONS}, got {eos!r}.")
  spec = tree.explicit_spec(tokens_BxL)
  rows = tokens_BxL
  if spec is not None and spec[-1] is not None:
    # Explicit axes refuse a cumulative sum along a sharded axis: count on
    # whole rows; the ids get the tokens' sharding back.
    rows = jax.sharding.reshard(tokens_BxL, jax.P(*spec[:-1], None))
  is_eos = (rows == EOS).astype(jnp.int32)
  count = jnp.cumsum(is_eos, axis=-1)
  ids = count if eos == "opens" else count - is_eos
  return tree.reshard_like(ids, tokens_BxL)


def sample_windows(key: jax.Array, tokens: jax.Array, batch_size: int,
                   length: int) -> jax.Array:
  """``batch_size`` random windows of ``length + 1`` tokens: ``(B, length + 1)``.

  A pure function of ``key`` (resumable by step); inputs are ``w[:, :-1]``
  and next-token targets ``w[:, 1:]``.

  Raises:
    ValueError: ``tokens`` not 1-D, ``batch_size`` or ``length`` not an int
      >= 1, or ``tokens`` too short for one window.
  """
  if len(np.shape(tokens)) != 1:
    raise ValueError(f"tokens must be 1-D; got shape {np.shape(tokens)}.")
  check_int("batch_size", batch_size, 1)
  check_int("length", length, 1)
  if tokens.shape[0] <= length + 1:
    raise ValueError(
        f"tokens has {tokens.shape[0]} entries, fewer than a window of {length + 1}."
    )
  starts = jax.random.randint(key, (batch_size,), 0, tokens.shape[0] - length - 1)
  offsets = jnp.arange(length + 1)
  indices_BxW = starts[:, None] + offsets[None, :]
  # A gather from tokens sharded along Explicit axes needs its output
  # sharding: the windows keep the starts' (a vmapped key's batch axis).
  index_spec = tree.explicit_spec(indices_BxW)
  out = (None if tree.explicit_spec(tokens) is None or index_spec is None
         else index_spec)
  return tokens.at[indices_BxW].get(out_sharding=out)
