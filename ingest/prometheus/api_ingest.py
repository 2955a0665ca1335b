"""Ingest a source (``dcgm`` or ``usage``) from the Prometheus HTTP API into the lake.

Plan: time windows (each one lake run, so re-running is idempotent) × series groups (each one
request per loader). Resume: without a start, the per-(cluster, source) watermark is the start.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from gpufinops.errors import InputError
from ingest.lake import LakeRun, LakeWriter
from ingest.prometheus.assemble import Assembler, Counts, ParsedSeries, parse_matrix
from ingest.prometheus.client import PromClient
from ingest.prometheus.plan import SplitLimits, Window, series_groups, time_windows
from ingest.prometheus.queries import MetricLoader, get_source
from ingest.prometheus.watermark import read_watermark, write_watermark
from ingest.schema import get_table

__all__ = ["IngestSummary", "ingest_range", "resolve_start"]

_log = logging.getLogger("gpufinops.ingest.prometheus")
T = TypeVar("T")
R = TypeVar("R")


@dataclass
class IngestSummary:
    source: str
    cluster: str
    start: datetime | None
    end: datetime
    step_s: float
    windows: int = 0
    requests: int = 0
    retries: int = 0
    run_ids: list[str] = field(default_factory=list)
    counts: Counts = field(default_factory=Counts)

    def as_dict(self) -> dict[str, object]:
        return {
            "source": self.source,
            "cluster": self.cluster,
            "start": self.start.isoformat() if self.start else None,
            "end": self.end.isoformat(),
            "step_s": self.step_s,
            "windows": self.windows,
            "requests": self.requests,
            "retries": self.retries,
            "runs": len(self.run_ids),
            **self.counts.as_dict(),
        }


def _flush(run: LakeRun, table: str, asm: Assembler | None, summary: IngestSummary, source: str, window: Window) -> int:
    if asm is None:
        return 0
    n = run.add(table, asm.table(), where=f"{source} window {window.start.isoformat()}")
    summary.counts.merge(asm.counts)
    return n


def _ordered_map(fn: Callable[[T], R], items: list[T], concurrency: int) -> Iterator[tuple[T, R]]:
    """``(item, fn(item))`` in order, with at most ``concurrency`` calls running ahead."""
    if concurrency <= 1:
        for item in items:
            yield item, fn(item)
        return
    with ThreadPoolExecutor(concurrency) as pool:
        pending: deque[tuple[T, Future[R]]] = deque()
        try:
            for item in items:
                pending.append((item, pool.submit(fn, item)))
                if len(pending) >= concurrency:
                    head, fut = pending.popleft()
                    yield head, fut.result()
            while pending:
                head, fut = pending.popleft()
                yield head, fut.result()
        finally:
            for _, fut in pending:
                fut.cancel()


def resolve_start(lake_root: Path, cluster: str, source: str, start: datetime | None) -> datetime:
    if start is not None:
        return start
    wm = read_watermark(lake_root, cluster, source)
    if wm is None:
        raise InputError(f"no watermark for cluster {cluster!r} and source {source!r} yet: pass --start for the first run")
    return wm


def ingest_range(
    client: PromClient,
    lake_root: Path,
    source: str,
    cluster: str,
    start: datetime | None,
    end: datetime,
    *,
    step_s: float = 60.0,
    limits: SplitLimits | None = None,
    loaders: list[MetricLoader] | None = None,
    on_window: Callable[[Window, int], None] | None = None,
    concurrency: int = 2,
    quality: Any = "fail",  # "fail" | "quarantine" | a QualityGate | the Settings (see LakeWriter)
) -> IngestSummary:
    """Fetch ``[start, end)`` window by window; each window commits one lake run, then the watermark.

    Up to ``concurrency`` requests are in flight at once, so Prometheus evaluates the next query
    while this process parses the last one; results are still consumed in order.
    """
    spec = get_source(source)
    limits = limits or SplitLimits()
    loaders = loaders or spec.loaders()
    begin = resolve_start(lake_root, cluster, source, start)
    summary = IngestSummary(source, cluster, begin, end, step_s)
    if begin >= end:
        _log.info("%s/%s: nothing to do, start %s is not before end %s", cluster, source, begin, end)
        return summary
    writer = LakeWriter(lake_root, quality=quality)
    requests_before, retries_before = client.log.count, client.log.retries
    for window in time_windows(begin, end, step_s, limits):
        with writer.run(source, cluster, window.start, window.end) as run:
            # Declare the table even if the window is empty, so a re-run clears its old rows.
            run.add(spec.table, get_table(spec.table).schema.empty_table())
            groups = series_groups(client, loaders, spec.split_labels, window, limits)
            tasks = [(g, loader) for g in range(len(groups)) for loader in loaders]

            def fetch(task: tuple[int, MetricLoader], window: Window = window, groups: list[str] = groups) -> list[ParsedSeries]:
                g, loader = task
                promql = loader.promql(groups[g], step_s=step_s)
                return parse_matrix(client.query_range(promql, window.start, window.last, step_s))

            rows = 0
            asm: Assembler | None = None
            current = -1
            for (g, loader), parsed in _ordered_map(fetch, tasks, concurrency):
                if g != current:  # a group is complete: its series never reappear in another group
                    rows += _flush(run, spec.table, asm, summary, source, window)
                    asm, current = Assembler(spec, [ld.column for ld in loaders]), g
                assert asm is not None
                asm.add_parsed(loader.column, parsed)
            rows += _flush(run, spec.table, asm, summary, source, window)
        write_watermark(lake_root, cluster, source, window.end, run.run_id)
        summary.windows += 1
        summary.run_ids.append(run.run_id)
        if on_window is not None:
            on_window(window, rows)
    summary.requests = client.log.count - requests_before
    summary.retries = client.log.retries - retries_before
    return summary
