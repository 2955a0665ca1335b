"""Hourly partial aggregates ("rollups") of the per-minute landing tables, kept in the lake.

For every raw Parquet file of ``gpu_samples``, ``container_usage`` or ``serving_requests`` the lake holds one rollup file
of the same name under ``<lake>/<table>_hourly/cluster=<c>/day=<d>/``: one row per key and hour with
counts, sums, minima, maxima and histograms that merge exactly over files (macros/rollups.sql). The
lake writer writes it in the same atomic run as the raw file; the build reads only the rollups
(~60x fewer rows) and, before dbt runs, :func:`ensure_rollups` writes the ones a lake lacks (a lake
from before rollups, or one whose rollup SQL changed).

The SQL is the dbt project's: the macros of macros/rollups.sql, rendered here with plain Jinja, the
vars of dbt_project.yml, and the DuckDB bodies of the macros they dispatch to, so each formula
stays in exactly one place. ``<lake>/_rollups.json`` records, per rollup table, the digest of the
rendered SQL the lake's rollups were made with; a different digest makes :func:`ensure_rollups` rewrite
that table's rollups (and only those: a new rollup is back-filled without rewriting the others).

``k8s_pods_last`` is not an aggregate: it keeps, per raw pod-snapshot file, the rows of each pod's
last snapshot in that file, as they are (its SQL names the rows; they are taken from the batch, so
the nested columns never pass through DuckDB), and the pod-spec model reads one row per pod and file
instead of every snapshot's nested columns. ``k8s_nodes_last`` likewise keeps, per raw node-snapshot
file, the rows of each node's last snapshot in each clock hour, which the node-hour model reads its
attributes (the capacity, allocatable and annotation maps) off.

A landing table may have several rollups (:data:`ROLLUPS`), one file each beside every raw file; its
digest covers all of them. The snapshot tables also keep ``k8s_pod_runs`` / ``k8s_node_runs`` (each run
of a key's consecutive snapshots per clock hour: the timelines as change intervals, which
int_pods_hourly and int_nodes_hourly read instead of every snapshot row) and ``k8s_pod_snapshots`` /
``k8s_node_snapshots`` (the file's snapshot times, for the snapshot timeline).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

import duckdb
import jinja2
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from gpufinops.errors import ConfigError
from gpufinops.project import PROJECT_DIR

__all__ = ["ROLLUPS", "Rollup", "spec_digest", "table_digests", "lake_digest", "lake_digests", "compute",
           "mirror", "ensure_rollups", "write_lake_digest", "has_raw_files", "rollup_sql", "SPEC_FILE"]

SPEC_FILE = "_rollups.json"
_BATCH = "__rollup_batch__"
_MACRO_FILES = ("staging.sql", "formulas.sql", "rollups.sql")


@dataclass(frozen=True)
class Rollup:
    source: str  # the landing table
    table: str  # the rollup table in the lake
    macro: str  # its macro in macros/rollups.sql
    selects_rows: bool = False  # the macro returns the positions (__row) of the raw rows to keep


# landing table -> its rollups, each one file beside every raw file of the table
ROLLUPS: dict[str, tuple[Rollup, ...]] = {
    "gpu_samples": (Rollup("gpu_samples", "gpu_samples_hourly", "rollup_gpu_samples"),),
    "container_usage": (Rollup("container_usage", "container_usage_hourly", "rollup_container_usage"),),
    "serving_requests": (Rollup("serving_requests", "serving_requests_hourly", "rollup_serving_requests"),),
    "k8s_pods": (Rollup("k8s_pods", "k8s_pods_last", "rollup_k8s_pods", selects_rows=True),
                 Rollup("k8s_pods", "k8s_pod_runs", "rollup_k8s_pod_runs"),
                 Rollup("k8s_pods", "k8s_pod_snapshots", "rollup_snapshot_times")),
    "k8s_nodes": (Rollup("k8s_nodes", "k8s_nodes_last", "rollup_k8s_nodes", selects_rows=True),
                  Rollup("k8s_nodes", "k8s_node_runs", "rollup_k8s_node_runs"),
                  Rollup("k8s_nodes", "k8s_node_snapshots", "rollup_snapshot_times")),
}
_BY_TABLE: dict[str, Rollup] = {r.table: r for rs in ROLLUPS.values() for r in rs}
# The rollups of a lake record with one digest over all of them (before per-table digests).
_LEGACY = ("gpu_samples", "container_usage", "serving_requests")


class _Adapter:
    """``adapter.dispatch`` of plain Jinja: the DuckDB body of a macro, else its default. The template
    module exists only once the template is made, so it is looked up at dispatch."""

    def __init__(self, holder: dict[str, Any]):
        self._holder = holder

    def dispatch(self, name: str, _package: str | None = None) -> Callable[..., str]:
        for candidate in (f"duckdb__{name}", f"default__{name}"):
            macro = getattr(self._holder["module"], candidate, None)
            if macro is not None:
                return macro
        raise ConfigError(f"macros: no duckdb__ or default__ body of '{name}' in {', '.join(_MACRO_FILES)}")


class _Exceptions:
    @staticmethod
    def raise_compiler_error(message: str) -> None:
        raise ConfigError(f"rollup SQL: {message}")


@lru_cache(maxsize=4)
def _rendered(project_dir: Path) -> dict[str, str]:
    """rollup table -> its SELECT over the relation ``__rollup_batch__``."""
    project = yaml.safe_load((project_dir / "dbt_project.yml").read_text())
    variables = project.get("vars") or {}

    def var(name: str, default: Any = None) -> Any:
        if name in variables:
            return variables[name]
        if default is None:
            raise ConfigError(f"rollup SQL: var '{name}' is not set in {project_dir / 'dbt_project.yml'}")
        return default

    env = jinja2.Environment(extensions=["jinja2.ext.do"], undefined=jinja2.StrictUndefined)
    source = "\n".join((project_dir / "macros" / f).read_text() for f in _MACRO_FILES)
    holder: dict[str, Any] = {}
    env.globals.update(var=var, exceptions=_Exceptions, adapter=_Adapter(holder), **{"return": lambda v: v})
    module = env.from_string(source).module
    holder["module"] = module
    out = {}
    for rs in ROLLUPS.values():
        for r in rs:
            out[r.table] = str(getattr(module, r.macro)(_BATCH)).strip()
    return out


def rollup_sql(table: str, project_dir: Path = PROJECT_DIR) -> str:
    """The SQL of a rollup table; of a landing table, its rollups' SQL (one after another)."""
    rendered = _rendered(project_dir)
    if table in ROLLUPS:
        return "\n\n".join(rendered[r.table] for r in ROLLUPS[table])
    return rendered[table]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def table_digests(project_dir: Path = PROJECT_DIR) -> dict[str, str]:
    """Landing table -> digest of its rollups' SQL: a table's rollups made with another are stale."""
    return {t: _digest(rollup_sql(t, project_dir)) for t in ROLLUPS}


def spec_digest(project_dir: Path = PROJECT_DIR) -> str:
    """One digest of every rollup's SQL (the record's summary line)."""
    return _digest(json.dumps(table_digests(project_dir), sort_keys=True))


def _record(root: Path) -> dict[str, Any] | None:
    try:
        record = json.loads((root / SPEC_FILE).read_text())
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise ConfigError(f"{root / SPEC_FILE}: not a rollup record ({exc}); delete it to rebuild the rollups") from exc
    if not isinstance(record, dict):
        raise ConfigError(f"{root / SPEC_FILE}: not a rollup record (not an object); delete it to rebuild the rollups")
    return record


def lake_digest(root: Path) -> str | None:
    """The record's summary digest (equal to :func:`spec_digest` when every rollup is current)."""
    record = _record(root)
    return None if record is None else record.get("digest")


def lake_digests(root: Path) -> dict[str, str] | None:
    """Landing table -> the digest its rollups in the lake were made with; None: no record. A record
    from before per-table digests (one digest over the SQL of the first three rollups) stands for
    those three when it equals that digest of the current SQL, else for none."""
    record = _record(root)
    if record is None:
        return None
    tables = record.get("tables")
    if isinstance(tables, dict):
        return {str(k): str(v) for k, v in tables.items()}
    legacy = json.dumps({t: rollup_sql(t) for t in _LEGACY}, sort_keys=True)
    if record.get("digest") == _digest(legacy):
        current = table_digests()
        return {t: current[t] for t in _LEGACY}
    return {}


def write_lake_digest(root: Path, tables: dict[str, str]) -> None:
    """Record the digest each table's rollups were made with (and their summary)."""
    tmp = root / (SPEC_FILE + ".tmp")
    tmp.write_text(json.dumps({"digest": _digest(json.dumps(tables, sort_keys=True)), "tables": tables,
                               "written_at": datetime.now().astimezone().isoformat()}))
    os.replace(tmp, root / SPEC_FILE)


def compute(table: str, data: pa.Table, *, project_dir: Path = PROJECT_DIR) -> pa.Table:
    """The rollup ``table`` of one raw file's rows (landing columns incl. the run columns)."""
    selects_rows = _BY_TABLE[table].selects_rows
    con = duckdb.connect()
    try:
        con.execute("set threads to 1")  # a writer's batch is small; the writers run in parallel
        con.execute("set enable_progress_bar = false")
        if selects_rows:  # the SQL reads the lean columns and names rows; they are taken as they are
            con.register(_BATCH, data.append_column("__row", pa.array(range(data.num_rows), pa.int64())))
            rows = con.sql(rollup_sql(table, project_dir)).to_arrow_table().column(0)
            return data.take(rows)
        con.register(_BATCH, data)
        out = con.sql(rollup_sql(table, project_dir)).to_arrow_table()
    finally:
        con.close()
    run_id = data.column("ingest_run_id")[0] if data.num_rows else pa.scalar(None, pa.string())
    at = data.column("ingested_at")[0] if data.num_rows else pa.scalar(None, data.schema.field("ingested_at").type)
    n = out.num_rows
    out = out.append_column("ingest_run_id", pa.array([run_id.as_py()] * n, pa.string()))
    return out.append_column("ingested_at", pa.array([at.as_py()] * n, data.schema.field("ingested_at").type))


def mirror(rel: str) -> list[tuple[str, str]]:
    """(rollup table, its file's lake-relative path) of each rollup of a raw file's lake-relative path
    (``<table>/cluster=../day=../f``); none for a table without rollups."""
    table, _, rest = rel.partition("/")
    return [(r.table, f"{r.table}/{rest}") for r in ROLLUPS.get(table, ())] if rest else []


def write(table: str, data: pa.Table, out: Path) -> None:
    """Write the rollup ``table`` of a raw file's rows to ``out``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(compute(table, data), out, compression="zstd")


def _raw_files(root: Path, table: str) -> Iterable[Path]:
    base = root / table
    return sorted(base.glob("cluster=*/day=*/*.parquet")) if base.is_dir() else []


def has_raw_files(root: Path, table: str) -> bool:
    """Whether the lake holds any raw file of ``table``."""
    return (root / table).is_dir() and next(iter((root / table).glob("cluster=*/day=*/*.parquet")), None) is not None


def ensure_rollups(root: Path, *, progress: Callable[[int, int], None] | None = None) -> dict[str, int]:
    """Make the lake's rollups match its raw files and the current rollup SQL, table by table; the
    caller holds the lake lock. Returns how many rollup files were written and removed."""
    want = table_digests()
    have = lake_digests(root)
    written = removed = 0
    todo: list[tuple[str, Path, Path]] = []
    for table, rs in ROLLUPS.items():
        stale = (have or {}).get(table) != want[table]
        raw = list(_raw_files(root, table))
        for r in rs:
            keep = {root / r.table / p.relative_to(root / table) for p in raw}
            for old in _raw_files(root, r.table):
                if stale or old not in keep:
                    old.unlink()
                    removed += 1
            for p in raw:
                dst = root / r.table / p.relative_to(root / table)
                if stale or not dst.exists():
                    todo.append((r.table, p, dst))
    for i, (table, src, dst) in enumerate(todo):
        tmp = dst.with_name(dst.name + ".tmp")
        write(table, pq.read_table(src), tmp)
        os.replace(tmp, dst)
        written += 1
        if progress:
            progress(i + 1, len(todo))
    if have != want:
        write_lake_digest(root, want)
    return {"written": written, "removed": removed}
