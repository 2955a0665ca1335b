"""Lake-level suites: rules across tables and runs, computed with DuckDB over the lake's Parquet
files and expressed/reported with Great Expectations.

DuckDB does the heavy part (joins and aggregations over millions of rows) and reduces each rule to
a small frame — one row per (provider, region, instance_type, capacity_type), per (node, resource)
or per run — which GX validates; the message is built from GX's result. Run by ``gpufinops check``
and callable before ``gpufinops build``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import duckdb

from ingest.lake import list_runs, run_is_alive
from ingest.quality import _ge
from ingest.schema import TABLES

__all__ = [
    "LakeCheck",
    "LakeCheckResult",
    "PriceCoverage",
    "NoOverallocation",
    "RunsFinal",
    "DuplicateKeys",
    "TableSuites",
    "PodsOnKnownNodes",
    "DuplicatePrices",
    "RejectedRuns",
    "LAKE_CHECKS",
    "run_lake_checks",
    "lake_connection",
]

Severity = Literal["error", "warning"]
_LIST_MAX = 50  # names listed in one message


@dataclass
class LakeCheckResult:
    name: str
    severity: Severity
    success: bool
    message: str
    checked: int = 0  # rows of the frame GX validated (combinations, node-resources, runs, ...)
    failing: list[dict[str, Any]] = field(default_factory=list)  # the offending frame rows
    skipped: bool = False
    ge_result: Any = field(default=None, repr=False)


class LakeCheck:
    """One lake-level rule. Subclasses set ``name``, ``severity``, ``needs`` and :meth:`run`."""

    name: ClassVar[str] = ""
    severity: ClassVar[Severity] = "error"
    needs: ClassVar[tuple[str, ...]] = ()  # landing tables that must have files
    description: ClassVar[str] = ""

    def run(self, con: duckdb.DuckDBPyConnection, root: Path) -> LakeCheckResult:
        raise NotImplementedError

    def _validate(self, frame: Any, expectation: Any) -> _ge.GeOutcome:
        (outcome,) = _ge.validate_frame(frame, [expectation], suite_name=f"lake.{self.name}")
        return outcome

    def _result(self, success: bool, message: str, frame: Any, outcome: _ge.GeOutcome) -> LakeCheckResult:
        failing = frame.iloc[outcome.unexpected_index_list].to_dict("records") if not success else []
        return LakeCheckResult(self.name, self.severity, success, message, len(frame), failing, ge_result=outcome.raw)


def lake_connection(root: Path) -> tuple[duckdb.DuckDBPyConnection, set[str]]:
    """An in-memory DuckDB with one view per landing table that has files; returns the tables seen."""
    con = duckdb.connect()
    con.execute("set TimeZone = 'UTC'")
    present = set()
    for name in TABLES:
        if any((root / name).glob("cluster=*/day=*/*.parquet")):
            pattern = str(root / name / "cluster=*" / "day=*" / "*.parquet").replace("'", "''")
            con.execute(f"create view {name} as select * from read_parquet('{pattern}', "
                        "hive_partitioning = false, union_by_name = true)")
            present.add(name)
    return con, present


@dataclass(frozen=True)
class PriceCoverage(LakeCheck):
    """Every (provider, region, instance_type, capacity_type) seen on nodes has a price in effect at
    every snapshot (a node's price annotation counts as a price). A warning: DESIGN §3 costs an
    unpriced node at 0 and never blocks the build."""

    name: ClassVar[str] = "price_coverage"
    severity: ClassVar[Severity] = "warning"
    needs: ClassVar[tuple[str, ...]] = ("k8s_nodes",)
    override_annotation: str = "gpufinops.io/price-usd-per-hour"

    def run(self, con: duckdb.DuckDBPyConnection, root: Path) -> LakeCheckResult:
        has_prices = _has_view(con, "prices")
        price_join = """
            left join prices p
              on p.provider is not distinct from s.provider and p.region is not distinct from s.region
             and p.instance_type is not distinct from s.instance_type
             and p.capacity_type is not distinct from s.capacity_type
             and p.effective_from <= s.snapshot_ts and (p.effective_to is null or s.snapshot_ts < p.effective_to)
        """ if has_prices else ""
        priced = "bool_or(p.usd_per_hour is not null)" if has_prices else "false"
        frame = con.execute(f"""
            with snaps as (
                select provider, region, instance_type, capacity_type, snapshot_ts, cluster, node
                from k8s_nodes
                where map_extract_value(annotations, ?) is null
            ), covered as (
                select s.provider, s.region, s.instance_type, s.capacity_type, s.snapshot_ts, s.cluster, s.node,
                       {priced} as priced
                from snaps s {price_join}
                group by all
            )
            select concat_ws('/', coalesce(provider, '(no provider)'), coalesce(region, '(no region)'),
                              coalesce(instance_type, '(no instance type)'), coalesce(capacity_type, '(no capacity type)')) as combination,
                   count(*) filter (where not priced) as unpriced_node_snapshots,
                   count(distinct cluster || '/' || node) filter (where not priced) as unpriced_nodes,
                   min(snapshot_ts) filter (where not priced) as first_unpriced,
                   max(snapshot_ts) filter (where not priced) as last_unpriced
            from covered
            group by all order by combination
        """, [self.override_annotation]).df()
        frame["unpriced_node_snapshots"] = frame["unpriced_node_snapshots"].fillna(0)
        outcome = self._validate(frame, _ge.expectations().ExpectColumnValuesToBeBetween(
            column="unpriced_node_snapshots", max_value=0))
        if outcome.success:
            return self._result(True, f"all {len(frame)} instance types seen on nodes are priced", frame, outcome)
        bad = frame.iloc[outcome.unexpected_index_list]
        names = [f"{r.combination} ({int(r.unpriced_nodes)} node{'s' if r.unpriced_nodes != 1 else ''}, "
                 f"{_day(r.first_unpriced)}..{_day(r.last_unpriced)})" for r in bad.head(_LIST_MAX).itertuples()]
        more = f" and {len(bad) - _LIST_MAX} more" if len(bad) > _LIST_MAX else ""
        msg = (f"k8s_nodes/prices: no price for {outcome.unexpected_count} of {len(frame)} (provider/region/"
               f"instance_type/capacity_type) seen on nodes: {', '.join(names)}{more}")
        return self._result(False, msg, frame, outcome)


@dataclass(frozen=True)
class NoOverallocation(LakeCheck):
    """In no snapshot do a node's pods request more of an NVIDIA resource (``nvidia.com/gpu``,
    ``nvidia.com/gpu.shared``, ``nvidia.com/mig-*``) than the node's capacity. A pod's request is
    Kubernetes' effective one: max(Σ containers, max init container), limits standing in for
    requests where only limits are set."""

    name: ClassVar[str] = "no_overallocation"
    severity: ClassVar[Severity] = "error"
    needs: ClassVar[tuple[str, ...]] = ("k8s_nodes", "k8s_pods")

    def run(self, con: duckdb.DuckDBPyConnection, root: Path) -> LakeCheckResult:
        frame = con.execute("""
            with containers as (
                select cluster, snapshot_ts, node, namespace, pod, false as init, unnest(containers) as c
                from k8s_pods where node is not null and coalesce(phase, '') not in ('Succeeded', 'Failed')
                union all
                select cluster, snapshot_ts, node, namespace, pod, true, unnest(init_containers)
                from k8s_pods where node is not null and coalesce(phase, '') not in ('Succeeded', 'Failed')
            ), quantities as (
                select cluster, snapshot_ts, node, namespace, pod, init, resource,
                       coalesce(map_extract_value(c.requests, resource), map_extract_value(c.limits, resource)) as qty
                from (select *, unnest(list_distinct(coalesce(map_keys(c.requests), []) || coalesce(map_keys(c.limits), []))) as resource
                      from containers)
                where resource like 'nvidia.com/%'
            ), pods as (
                select cluster, snapshot_ts, node, namespace, pod, resource,
                       greatest(coalesce(sum(qty) filter (where not init), 0), coalesce(max(qty) filter (where init), 0)) as requested
                from quantities group by all
            ), per_node as (
                select cluster, snapshot_ts, node, resource, sum(requested) as requested,
                       list(namespace || '/' || pod order by requested desc, namespace, pod) as pods
                from pods group by all
            ), joined as (
                select u.*, coalesce(map_extract_value(n.capacity, u.resource),
                                     case when u.resource = 'nvidia.com/gpu' then n.gpu_count * coalesce(n.gpu_replicas, 1) end,
                                     0) as capacity
                from per_node u join k8s_nodes n using (cluster, snapshot_ts, node)
            )
            select cluster, node, resource,
                   max(requested - capacity) as max_excess,
                   count(*) filter (where requested > capacity) as overallocated_snapshots,
                   count(*) as snapshots,
                   arg_max(requested, requested - capacity) as requested,
                   arg_max(capacity, requested - capacity) as capacity,
                   arg_max(snapshot_ts, requested - capacity) as worst_snapshot,
                   arg_max(pods, requested - capacity) as pods
            from joined group by all order by cluster, node, resource
        """).df()
        outcome = self._validate(frame, _ge.expectations().ExpectColumnValuesToBeBetween(column="max_excess", max_value=0))
        if outcome.success:
            return self._result(True, f"no over-allocated node ({len(frame)} node-resources checked)", frame, outcome)
        bad = frame.iloc[outcome.unexpected_index_list]
        names = [f"{r.cluster}/{r.node} {r.resource} {r.requested:g} requested > {r.capacity:g} at {_ts(r.worst_snapshot)} "
                 f"({int(r.overallocated_snapshots)} snapshot{'s' if r.overallocated_snapshots != 1 else ''}; pods {', '.join(list(r.pods)[:3])})"
                 for r in bad.head(_LIST_MAX).itertuples()]
        more = f" and {len(bad) - _LIST_MAX} more" if len(bad) > _LIST_MAX else ""
        msg = f"k8s_pods/k8s_nodes: {outcome.unexpected_count} over-allocated node-resource{'s' if outcome.unexpected_count != 1 else ''}: {'; '.join(names)}{more}"
        return self._result(False, msg, frame, outcome)


@dataclass(frozen=True)
class RunsFinal(LakeCheck):
    """Every run record has a final status (committed, failed, quarantined); a run still in
    progress (its process holds its staging lock) is fine, a ``running`` record without one is not."""

    name: ClassVar[str] = "runs_final"
    severity: ClassVar[Severity] = "error"
    final: ClassVar[tuple[str, ...]] = ("committed", "failed", "quarantined", "in_progress")

    def run(self, con: duckdb.DuckDBPyConnection, root: Path) -> LakeCheckResult:
        import pandas as pd

        records, unreadable = [], []
        for path in sorted((root / "_runs").glob("*.json")):
            try:
                json.loads(path.read_text())
            except (OSError, ValueError):
                unreadable.append({"run_id": path.stem, "status": "(unreadable record)", "source": None,
                                   "cluster": None, "window": None})
        for r in list_runs(root) if not unreadable else []:
            status = "in_progress" if r.status == "running" and run_is_alive(root, r.run_id) else r.status
            records.append({"run_id": r.run_id, "status": status, "source": r.source, "cluster": r.cluster,
                            "window": f"{r.window_start}..{r.window_end}"})
        frame = pd.DataFrame(records + unreadable, columns=["run_id", "status", "source", "cluster", "window"])
        outcome = self._validate(frame, _ge.expectations().ExpectColumnValuesToBeInSet(column="status", value_set=list(self.final)))
        if outcome.success:
            quarantined = int((frame["status"] == "quarantined").sum())
            note = f" ({quarantined} quarantined: see _quarantine/<run_id>/reason.json)" if quarantined else ""
            return self._result(True, f"all {len(frame)} run records are final or in progress{note}", frame, outcome)
        bad = frame.iloc[outcome.unexpected_index_list]
        names = [f"{r.run_id} ({r.status}; {r.source} {r.cluster} {r.window})" for r in bad.head(_LIST_MAX).itertuples()]
        msg = f"_runs: {outcome.unexpected_count} run record(s) without a final status: {', '.join(names)}"
        return self._result(False, msg, frame, outcome)


@dataclass(frozen=True)
class DuplicateKeys(LakeCheck):
    """Keys are unique across the whole lake per cluster, not just per batch (catches overlapping
    batches of one run and two sources writing the same series). Scans every key: opt-in (deep)."""

    name: ClassVar[str] = "duplicate_keys"
    severity: ClassVar[Severity] = "error"
    deep: ClassVar[bool] = True

    def run(self, con: duckdb.DuckDBPyConnection, root: Path) -> LakeCheckResult:
        import pandas as pd

        rows = []
        for name, t in TABLES.items():
            if not _has_view(con, name):
                continue
            key = ", ".join(f'"{k}"' for k in ("cluster", *t.key))
            dup_keys, dup_rows, example = con.execute(f"""
                select count(*), coalesce(sum(n), 0), min(k) from (
                    select count(*) as n, cast(row({key}) as varchar) as k from {name} group by {key} having count(*) > 1)
            """).fetchall()[0]
            rows.append({"table": name, "duplicated_keys": int(dup_keys), "rows": int(dup_rows), "example": example})
        frame = pd.DataFrame(rows, columns=["table", "duplicated_keys", "rows", "example"])
        outcome = self._validate(frame, _ge.expectations().ExpectColumnValuesToBeBetween(column="duplicated_keys", max_value=0))
        if outcome.success:
            return self._result(True, f"keys unique in {len(frame)} tables", frame, outcome)
        bad = frame.iloc[outcome.unexpected_index_list]
        msg = "; ".join(f"{r.table}: {r.duplicated_keys} keys on {r.rows} rows, e.g. {r.example}" for r in bad.itertuples())
        return self._result(False, f"duplicate keys across the lake: {msg}", frame, outcome)


@dataclass(frozen=True)
class TableSuites(LakeCheck):
    """Every file already in the lake passes its table's batch suite (files written before the
    gate existed, or copied in by hand). Reads every file: opt-in (deep)."""

    name: ClassVar[str] = "table_suites"
    severity: ClassVar[Severity] = "error"
    deep: ClassVar[bool] = True

    def run(self, con: duckdb.DuckDBPyConnection, root: Path) -> LakeCheckResult:
        import pandas as pd
        import pyarrow.parquet as pq

        from ingest.lake import partition_files
        from ingest.quality.gate import QualityGate

        gate = QualityGate()
        rows = []
        for name, table in TABLES.items():
            files = partition_files(root, name)
            if not files:
                continue
            failed, first, n = 0, "", 0
            for path in files:
                data = pq.read_table(path, columns=[c for c in table.schema.names if c in pq.read_schema(path).names])
                n += data.num_rows
                report = gate.validate(name, data)
                if not report.success:
                    failed += 1
                    first = first or f"{path.relative_to(root)}: {report.message}"
            rows.append({"table": name, "files": len(files), "rows": n, "failed_files": failed, "first_failure": first})
        frame = pd.DataFrame(rows, columns=["table", "files", "rows", "failed_files", "first_failure"])
        outcome = self._validate(frame, _ge.expectations().ExpectColumnValuesToBeBetween(column="failed_files", max_value=0))
        if outcome.success:
            return self._result(True, f"{int(frame['files'].sum())} files of {len(frame)} tables pass their suites", frame, outcome)
        bad = frame.iloc[outcome.unexpected_index_list]
        msg = "; ".join(f"{r.table}: {r.failed_files} of {r.files} files fail, first {r.first_failure}" for r in bad.itertuples())
        return self._result(False, msg, frame, outcome)


@dataclass(frozen=True)
class PodsOnKnownNodes(LakeCheck):
    """Every scheduled pod's node is in the same snapshot (a pod on a node the snapshot does not
    hold is costed at 0 GPU-hours). A warning: a dump of pods alone has no nodes, so snapshots
    without any node row are not judged."""

    name: ClassVar[str] = "pods_on_known_nodes"
    severity: ClassVar[Severity] = "warning"
    needs: ClassVar[tuple[str, ...]] = ("k8s_nodes", "k8s_pods")

    def run(self, con: duckdb.DuckDBPyConnection, root: Path) -> LakeCheckResult:
        frame = con.execute("""
            with snaps as (select distinct cluster, snapshot_ts from k8s_nodes),
            pods as (
                select p.cluster, p.snapshot_ts, p.namespace, p.pod, p.node
                from k8s_pods p join snaps s using (cluster, snapshot_ts)
                where p.node is not null
            )
            select p.cluster, p.node, count(*) as pod_snapshots, min(p.snapshot_ts) as first_seen,
                   min(p.namespace || '/' || p.pod) as example_pod,
                   count(*) filter (where n.node is null) as unknown
            from pods p left join k8s_nodes n using (cluster, snapshot_ts, node)
            group by all order by p.cluster, p.node
        """).df()
        outcome = self._validate(frame, _ge.expectations().ExpectColumnValuesToBeBetween(column="unknown", max_value=0))
        if outcome.success:
            return self._result(True, f"every pod is on a node of its snapshot ({len(frame)} nodes checked)", frame, outcome)
        bad = frame.iloc[outcome.unexpected_index_list]
        names = [f"{r.cluster}/{r.node} ({int(r.unknown)} pod snapshot(s), e.g. {r.example_pod} at {_ts(r.first_seen)})"
                 for r in bad.head(_LIST_MAX).itertuples()]
        msg = f"k8s_pods: pods on {len(bad)} node(s) missing from their snapshot (costed at 0 GPU-hours): {'; '.join(names)}"
        return self._result(False, msg, frame, outcome)


@dataclass(frozen=True)
class DuplicatePrices(LakeCheck):
    """No price key (provider, region, instance_type, capacity_type, effective_from) is landed from
    two files: the warehouse could only pick one of them. New ingests refuse it; this finds lakes
    that already hold such pairs."""

    name: ClassVar[str] = "duplicate_prices"
    severity: ClassVar[Severity] = "error"
    needs: ClassVar[tuple[str, ...]] = ("prices",)

    def run(self, con: duckdb.DuckDBPyConnection, root: Path) -> LakeCheckResult:
        frame = con.execute("""
            select concat_ws('/', provider, region, instance_type, capacity_type) as combination,
                   effective_from, count(*) as rows, list(distinct coalesce(source, '?') order by coalesce(source, '?')) as files
            from prices group by provider, region, instance_type, capacity_type, effective_from
            order by combination, effective_from
        """).df()
        outcome = self._validate(frame, _ge.expectations().ExpectColumnValuesToBeBetween(column="rows", max_value=1))
        if outcome.success:
            return self._result(True, f"{len(frame)} price keys, each from one file", frame, outcome)
        bad = frame.iloc[outcome.unexpected_index_list]
        names = [f"{r.combination} from {_ts(r.effective_from)} in {' and '.join(list(r.files))}"
                 for r in bad.head(_LIST_MAX).itertuples()]
        msg = f"prices: {len(bad)} price key(s) landed more than once: {'; '.join(names)}"
        return self._result(False, msg, frame, outcome)


@dataclass(frozen=True)
class RejectedRuns(LakeCheck):
    """The runs the ingest gate refused or quarantined, with why (a warning: nothing of them was
    written, but their data is missing until the input is fixed and re-ingested)."""

    name: ClassVar[str] = "rejected_runs"
    severity: ClassVar[Severity] = "warning"

    def run(self, con: duckdb.DuckDBPyConnection, root: Path) -> LakeCheckResult:
        import pandas as pd

        runs = list_runs(root)
        latest: dict[tuple[str, str, str, str], Any] = {}
        for r in runs:  # a slice landed after a rejection clears it
            latest[(r.source, r.cluster, r.window_start, r.window_end)] = r
        rows = [{"run_id": r.run_id, "status": r.status, "source": r.source, "cluster": r.cluster,
                 "error": (r.error or "")[:300], "rejected": int(r.status in ("failed", "quarantined"))}
                for r in latest.values()]
        frame = pd.DataFrame(rows, columns=["run_id", "status", "source", "cluster", "error", "rejected"])
        outcome = self._validate(frame, _ge.expectations().ExpectColumnValuesToBeBetween(column="rejected", max_value=0))
        if outcome.success:
            return self._result(True, f"no rejected run among the latest of {len(frame)} slices", frame, outcome)
        bad = frame.iloc[outcome.unexpected_index_list]
        names = [f"{r.run_id} ({r.status}; {r.source} {r.cluster}): {r.error}" for r in bad.head(_LIST_MAX).itertuples()]
        return self._result(False, f"{len(bad)} slice(s) whose latest run was rejected: {' | '.join(names)}", frame, outcome)


LAKE_CHECKS: dict[str, LakeCheck] = {
    c.name: c for c in (PriceCoverage(), NoOverallocation(), PodsOnKnownNodes(), DuplicatePrices(), RunsFinal(),
                        RejectedRuns(), DuplicateKeys(), TableSuites())
}


def run_lake_checks(root: Path | str, *, names: list[str] | None = None, deep: bool = False) -> list[LakeCheckResult]:
    """Run the lake-level suites (all but the deep ones unless ``deep``, or exactly ``names``)."""
    root = Path(root)
    unknown = sorted(set(names or []) - set(LAKE_CHECKS))
    if unknown:
        raise KeyError(f"unknown lake check(s) {unknown}; known: {', '.join(LAKE_CHECKS)}")
    chosen = [LAKE_CHECKS[n] for n in names] if names else [c for c in LAKE_CHECKS.values() if deep or not getattr(c, "deep", False)]
    con, present = lake_connection(root)
    try:
        out = []
        for check in chosen:
            missing = [t for t in check.needs if t not in present]
            if missing:
                out.append(LakeCheckResult(check.name, check.severity, True, f"skipped: no {', '.join(missing)} in the lake", skipped=True))
                continue
            out.append(check.run(con, root))
        return out
    finally:
        con.close()


def _has_view(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    return bool(con.execute("select count(*) from duckdb_views() where view_name = ?", [name]).fetchall()[0][0])


def _day(ts: Any) -> str:
    return str(ts)[:10]


def _ts(ts: Any) -> str:
    return str(ts).replace("+00:00", "Z")
