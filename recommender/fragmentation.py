"""GPU fragmentation (Weng et al., "Beware of Fragmentation", USENIX ATC '23), DESIGN §3.

The formula lives in one place, :mod:`gpufinops.capacity`; this module keeps the recommender's
import path and call signatures.
"""

from __future__ import annotations

from gpufinops.capacity import (
    TaskShape,
    device_free_fractions,
    fragmentation_report,
    node_fragmentation,
    place_fractions,
    task_distribution,
)

__all__ = [
    "TaskShape",
    "node_fragmentation",
    "fragmentation_report",
    "task_distribution",
    "device_free_fractions",
    "place_fractions",
]
