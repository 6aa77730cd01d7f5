"""Evaluation Cards: EEE run records, the four interpretive signals, reader modes.

Ghosh, Reuel, Chim, Kennedy et al., "Evaluation Cards: An Interpretive Layer
for AI Evaluation Reporting", arXiv 2606.09809. Records use the field names
of the public "Every Eval Ever" schema (github.com/evaleval/every_eval_ever);
what is ours is said in ``docs/evaluation_cards.md``. Point
:func:`load_directory` at any directory of EEE records, of any schema
version, and :func:`analyze` the result: every record is shown, with what it
violates of the version it declares as a completeness finding.
"""

from jaxpapers import _deprecation
from jaxpapers.evalcards._records import load_directory
from jaxpapers.evalcards._records import Loaded
from jaxpapers.evalcards._records import result_entry
from jaxpapers.evalcards._records import run_record
from jaxpapers.evalcards._render import AUDIENCES
from jaxpapers.evalcards._render import badges
from jaxpapers.evalcards._render import summary
from jaxpapers.evalcards._schema import RECORD_SCHEMA
from jaxpapers.evalcards._schema import record_errors
from jaxpapers.evalcards._schema import RecordError
from jaxpapers.evalcards._schema import SCHEMA_VERSION
from jaxpapers.evalcards._schema import validate_record
from jaxpapers.evalcards._signals import analyze
from jaxpapers.evalcards._signals import comparability
from jaxpapers.evalcards._signals import completeness
from jaxpapers.evalcards._signals import divergence_threshold
from jaxpapers.evalcards._signals import normalize_organization
from jaxpapers.evalcards._signals import provenance
from jaxpapers.evalcards._signals import reproducibility
from jaxpapers.evalcards._signals import rows

__all__ = [
    "load_directory",
    "Loaded",
    "result_entry",
    "run_record",
    "AUDIENCES",
    "badges",
    "summary",
    "RECORD_SCHEMA",
    "record_errors",
    "RecordError",
    "SCHEMA_VERSION",
    "validate_record",
    "analyze",
    "comparability",
    "completeness",
    "divergence_threshold",
    "normalize_organization",
    "provenance",
    "reproducibility",
    "rows",
]

_deprecation.install(__name__)
