"""Ingest a saved dcgm-exporter scrape (text format or OpenMetrics) into ``gpu_samples``.

Sample timestamps are used when present; otherwise ``at`` or, failing that, the file's mtime. The
lake run covers ``[first sample second, last sample second + 1 s)`` under source ``dcgm-file``, so
re-ingesting the same file replaces its rows and never touches windows fetched from the API.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from gpufinops.errors import InputError
from ingest.lake import LakeWriter
from ingest.prometheus.assemble import Assembler, Counts
from ingest.prometheus.exposition import ExpositionStats, parse_exposition
from ingest.prometheus.queries import get_source

__all__ = ["FILE_SOURCE", "FileIngestSummary", "ingest_exposition_file"]

FILE_SOURCE = "dcgm-file"


@dataclass
class FileIngestSummary:
    file: str
    cluster: str
    openmetrics: bool
    window_start: datetime | None = None
    window_end: datetime | None = None
    run_id: str | None = None
    lines: int = 0
    unlabeled_skipped: int = 0
    other_metrics_skipped: int = 0
    counts: Counts = field(default_factory=Counts)

    def as_dict(self) -> dict[str, object]:
        return {
            "file": self.file,
            "cluster": self.cluster,
            "format": "openmetrics" if self.openmetrics else "text",
            "window_start": self.window_start.isoformat() if self.window_start else None,
            "window_end": self.window_end.isoformat() if self.window_end else None,
            "lines": self.lines,
            "unlabeled_skipped": self.unlabeled_skipped,
            "other_metrics_skipped": self.other_metrics_skipped,
            **self.counts.as_dict(),
        }


def ingest_exposition_file(path: Path, lake_root: Path, cluster: str, *, at: datetime | None = None,
                           quality: Any = "fail") -> FileIngestSummary:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"exposition file {path} does not exist")
    spec = get_source("dcgm")
    loaders = spec.loaders()
    by_metric = {ld.metric: ld.column for ld in loaders}
    default_ts = (at or datetime.fromtimestamp(path.stat().st_mtime, tz=UTC)).timestamp()

    stats = ExpositionStats()
    # (column, label set) -> list of (ts, value); parsing completes before anything is written,
    # so a malformed line anywhere leaves the lake untouched.
    series: dict[tuple[str, tuple[tuple[str, str], ...]], list[tuple[float, float]]] = defaultdict(list)
    other = 0
    for s in parse_exposition(path, stats):
        column = by_metric.get(s.name)
        if column is None:
            other += 1
            continue
        series[(column, tuple(sorted(s.labels.items())))].append((s.ts_s if s.ts_s is not None else default_ts, s.value))

    summary = FileIngestSummary(str(path), cluster, stats.openmetrics, lines=stats.lines,
                                unlabeled_skipped=stats.unlabeled_skipped, other_metrics_skipped=other)
    asm = Assembler(spec, [ld.column for ld in loaders])
    lo, hi = math.inf, -math.inf
    for (column, labels), points in series.items():
        ts = np.array([p[0] for p in points], dtype=np.float64)
        lo, hi = min(lo, float(ts.min())), max(hi, float(ts.max()))
        values = np.array([p[1] for p in points], dtype=np.float64)
        asm.add_series(column, dict(labels), np.round(ts * 1e6).astype(np.int64), values)
    table = asm.table()
    summary.counts = asm.counts
    if not series:
        return summary  # nothing of DCGM's in the file: no run, nothing replaced
    start = datetime.fromtimestamp(math.floor(lo), tz=UTC)
    end = datetime.fromtimestamp(math.floor(hi), tz=UTC) + timedelta(seconds=1)
    summary.window_start, summary.window_end = start, end
    with LakeWriter(lake_root, quality=quality).run(FILE_SOURCE, cluster, start, end) as run:
        run.add(spec.table, table, where=str(path))
    summary.run_id = run.run_id
    return summary
