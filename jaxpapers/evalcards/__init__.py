"""Evaluation Cards: EEE run records, the four interpretive signals, reader modes.

Ghosh, Reuel, Chim, Kennedy et al., "Evaluation Cards: An Interpretive Layer
for AI Evaluation Reporting", arXiv 2606.09809. Records use the field names
of the public "Every Eval Ever" schema (github.com/evaleval/every_eval_ever);
what is ours is said in ``docs/evaluation_cards.md``. Point
:func:`load_directory` at any directory of EEE records, of any schema
version, and :func:`analyze` the result: every record is shown, with what it
violates of the version it declares as a completeness finding.
"""

from jaxpapers.evalcards.records import load_directory
from jaxpapers.evalcards.records import Loaded
from jaxpapers.evalcards.records import result_entry
from jaxpapers.evalcards.records import run_record
from jaxpapers.evalcards.render import AUDIENCES
from jaxpapers.evalcards.render import badges
from jaxpapers.evalcards.render import summary
from jaxpapers.evalcards.schema import RECORD_SCHEMA
from jaxpapers.evalcards.schema import record_errors
from jaxpapers.evalcards.schema import RecordError
from jaxpapers.evalcards.schema import SCHEMA_VERSION
from jaxpapers.evalcards.schema import validate_record
from jaxpapers.evalcards.signals import analyze
from jaxpapers.evalcards.signals import comparability
from jaxpapers.evalcards.signals import completeness
from jaxpapers.evalcards.signals import divergence_threshold
from jaxpapers.evalcards.signals import normalize_organization
from jaxpapers.evalcards.signals import provenance
from jaxpapers.evalcards.signals import reproducibility
from jaxpapers.evalcards.signals import rows
