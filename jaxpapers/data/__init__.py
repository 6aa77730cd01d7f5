"""Data: sets that ship inside pip packages, generators, and pure mini-batch sampling."""

from jaxpapers import _deprecation
from jaxpapers.data._advection import advection_dataset
from jaxpapers.data._advection import advection_trajectory
from jaxpapers.data._digits import Digits
from jaxpapers.data._digits import DigitsSplit
from jaxpapers.data._digits import load_digits
from jaxpapers.data._digits import split_digits
from jaxpapers.data._sampling import minibatch_indices
from jaxpapers.data._sampling import sample_minibatches
from jaxpapers.data._sampling import take
from jaxpapers.data._multidomain import DOMAINS
from jaxpapers.data._multidomain import MultiDomainCorpus
from jaxpapers.data._multidomain import csv_texts
from jaxpapers.data._multidomain import arithmetic_document
from jaxpapers.data._multidomain import chunk_texts
from jaxpapers.data._multidomain import load_multidomain
from jaxpapers.data._multidomain import interleaved_tokens
from jaxpapers.data._multidomain import consecutive_windows
from jaxpapers.data._text import EOS
from jaxpapers.data._text import VOCAB_SIZE
from jaxpapers.data._text import python_docs_documents
from jaxpapers.data._text import python_source_documents
from jaxpapers.data._text import provenance as text_provenance
from jaxpapers.data._text import encode_documents
from jaxpapers.data._text import split_documents
from jaxpapers.data._text import segment_ids
from jaxpapers.data._text import sample_windows
from jaxpapers.data._series import chronological_split
from jaxpapers.data._series import ChronologicalSplit
from jaxpapers.data._series import load_series
from jaxpapers.data._series import lorenz96
from jaxpapers.data._series import Series
from jaxpapers.data._series import sliding_windows
from jaxpapers.data._series import STATSMODELS_SERIES

__all__ = [
    "advection_dataset",
    "advection_trajectory",
    "Digits",
    "DigitsSplit",
    "load_digits",
    "split_digits",
    "minibatch_indices",
    "sample_minibatches",
    "take",
    "DOMAINS",
    "MultiDomainCorpus",
    "csv_texts",
    "arithmetic_document",
    "chunk_texts",
    "load_multidomain",
    "interleaved_tokens",
    "consecutive_windows",
    "EOS",
    "VOCAB_SIZE",
    "python_docs_documents",
    "python_source_documents",
    "text_provenance",
    "encode_documents",
    "split_documents",
    "segment_ids",
    "sample_windows",
    "chronological_split",
    "ChronologicalSplit",
    "load_series",
    "lorenz96",
    "Series",
    "sliding_windows",
    "STATSMODELS_SERIES",
]

_deprecation.install(__name__)
