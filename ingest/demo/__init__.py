"""The demo fleet: realistic landing data replayed from public traces (``gpufinops demo``).

``fleet`` makes clusters, pools and nodes; ``workload`` teams and pods; ``scheduler`` places them
on devices; ``telemetry`` and ``snapshots`` turn that into the landing tables; ``generate`` writes
one lake run per (cluster, day).
"""

from ingest.demo.generate import DemoOptions, DemoSummary, generate_demo

__all__ = ["DemoOptions", "DemoSummary", "generate_demo"]
