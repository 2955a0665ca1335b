"""FOCUS (FinOps Open Cost and Usage Specification) 1.0-1.3 bills to the ``billing_focus`` table.

``read_focus_file`` types one CSV/Parquet file; ``ingest_focus_files`` lands files, one lake run per
(billing period, provider, billing account, sub-account); ``demo_bill.write_demo_bill`` makes a FOCUS 1.2 bill for the demo fleet.
"""

from ingest.focus.land import BILLING_CLUSTER, FocusIngestResult, expand_paths, ingest_focus_files, provider_key
from ingest.focus.reader import FocusFile, read_focus_file
from ingest.focus.spec import MANDATORY, VERSIONS, detect_version, missing_mandatory

__all__ = [
    "BILLING_CLUSTER",
    "MANDATORY",
    "VERSIONS",
    "FocusFile",
    "FocusIngestResult",
    "detect_version",
    "expand_paths",
    "ingest_focus_files",
    "missing_mandatory",
    "provider_key",
    "read_focus_file",
]
