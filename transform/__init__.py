"""The warehouse build: runs the dbt project (models/, macros/, seeds/) over the lake.

The ground kernel never imports this package; the CLI and the other parts call it.
"""

from transform.runner import BuildFailed, BuildLocked, BuildResult, NodeResult, dbt_vars, run_build, seed_digest
from transform.summary import ShowbackSummary, showback_summary

__all__ = [
    "BuildFailed",
    "BuildLocked",
    "BuildResult",
    "NodeResult",
    "ShowbackSummary",
    "dbt_vars",
    "run_build",
    "seed_digest",
    "showback_summary",
]
