"""Data-quality gates on the landing tables (Great Expectations suites, vectorised pre-checks).

The lake writer runs :class:`QualityGate` on every batch, so every ingester gets the gate without
calling it. Ingesters may also validate a batch up front (``QualityGate().validate(table, data)``)
to report all problems of a file before opening a run. Lake-level suites (prices for every node,
no over-allocated node, final run statuses) live in :mod:`ingest.quality.lake_checks`.
"""

from ingest.quality.checks import CHECK_KINDS, Check
from ingest.quality.gate import QUARANTINE_DIR, CheckFailure, OnFailure, QualityGate, ValidationReport
from ingest.quality.suites import SUITES, TableSuite, get_suite

__all__ = [
    "CHECK_KINDS",
    "Check",
    "CheckFailure",
    "OnFailure",
    "QUARANTINE_DIR",
    "QualityGate",
    "SUITES",
    "TableSuite",
    "ValidationReport",
    "get_suite",
]
