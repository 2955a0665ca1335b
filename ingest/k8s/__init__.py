"""Kubernetes ingest: nodes, pods and namespaces from the API or a ``kubectl -o json`` dump.

- :mod:`ingest.k8s.mapping` - objects to landing rows (pure);
- :mod:`ingest.k8s.providers` - what node labels say about provider, capacity type and pool;
- :mod:`ingest.k8s.snapshot` - one snapshot to the three tables, landed as one lake run;
- :mod:`ingest.k8s.dump` - dump files to snapshots;
- :mod:`ingest.k8s.live` - the API: pagination, 410 restarts, retries, RBAC errors, loop mode;
- :mod:`ingest.k8s.settings` - :class:`K8sSettings`;

A synthetic dump of any size and its throughput: :mod:`testsupport.k8s_synthetic` (dev checkout only).
"""

from ingest.k8s.dump import expand_dump_paths, read_dump
from ingest.k8s.settings import K8sSettings, OwnerResource, parse_duration
from ingest.k8s.snapshot import SOURCE, Snapshot, land_snapshot, snapshot_tables

__all__ = [
    "SOURCE",
    "K8sSettings",
    "OwnerResource",
    "Snapshot",
    "expand_dump_paths",
    "land_snapshot",
    "parse_duration",
    "read_dump",
    "snapshot_tables",
]
