"""The lake writer: every landing table as Parquet under ``<lake>/<table>/cluster=<c>/day=<d>/``.

``<c>`` (and the source part of every file name) is :func:`encode_name` of the name: injective and
reversible, so ``a/b`` and ``a-b`` never share a folder. A lake written with the old lossy names is
upgraded in place the first time a writer opens it (:func:`upgrade_layout`).

A *run* writes one (source, cluster, window) slice of one or more tables. Its files are written
aside under ``_staging/<run_id>/`` and committed by renames, driven by a plan that is itself
written atomically before the first rename; a run killed before the plan exists leaves nothing
behind, and one killed during the renames is rolled forward the next time a writer opens the lake.
Re-running the same slice replaces exactly the files of that slice; a different window of the same
source that overlaps it is trimmed, so no row is ever counted twice. Every run is recorded under
``_runs/<run_id>.json`` with its window, row counts, status and error.

Every batch passes the data-quality gate (:mod:`ingest.quality`) before it is staged. A rejected
batch aborts the run (nothing of it is committed); with ``quality="quarantine"`` the batch and the
reason are first kept under ``_quarantine/<run_id>/`` and the run is recorded as ``quarantined``.
At commit, a table whose batches overlap in time is also checked for keys repeated across batches.

A live run holds an exclusive ``flock`` on ``_staging/<run_id>/.alive``; recovery (when a writer
opens the lake and before every commit) only touches staging folders whose owner is gone, so
concurrent writers never clean up each other's runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from gpufinops.errors import SchemaError, ValidationFailed
from ingest import rollups
from ingest.quality.gate import OnFailure, QualityGate, write_quarantine
from ingest.schema import TABLES, TS, LandingTable, get_table

__all__ = ["LakeWriter", "LakeRun", "RunRecord", "conform", "lake_clusters", "list_runs", "partition_files", "run_is_alive",
           "encode_name", "decode_name", "upgrade_layout", "LAYOUT_VERSION"]

_STAGING = "_staging"
_RUNS = "_runs"
_PLAN = "COMMIT.json"
_ALIVE = ".alive"
_KEEP = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-")
_LAYOUT = "_layout.json"
LAYOUT_VERSION = 2  # 1: lossy names (every run of other characters -> '-'); 2: percent-encoded
_FILE_RE = re.compile(r"^(?P<source>.+?)__(?P<start>\d{8}T\d{6}Z)__(?P<end>\d{8}T\d{6}Z)__part(?P<part>\d+)\.parquet$")
_ROW_GROUP = 1 << 20


def _stamp(ts: datetime) -> str:
    return ts.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def _parse_stamp(s: str) -> datetime:
    return datetime.strptime(s, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)


def _utc(ts: datetime) -> datetime:
    if ts.tzinfo is None:
        return ts.replace(tzinfo=UTC)
    return ts.astimezone(UTC)


def encode_name(name: str) -> str:
    """A cluster or source name as one path segment: injective and reversible (:func:`decode_name`).

    Letters, digits, ``.`` and ``-`` stay as they are (so every name that was already safe keeps
    its folder); every other UTF-8 byte becomes ``%XX`` (``/`` -> ``%2F``, ``:`` -> ``%3A``,
    ``_`` -> ``%5F``, ``%`` -> ``%25``). ``.`` and ``..`` on their own are escaped too."""
    if not name:
        raise SchemaError("an empty name cannot be a lake path segment (cluster and source need a value)")
    if name in (".", ".."):
        return name.replace(".", "%2E")
    out = []
    for ch in name:
        if ch in _KEEP:
            out.append(ch)
        else:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8"))
    return "".join(out)


def decode_name(segment: str) -> str:
    """The name :func:`encode_name` made ``segment`` from."""
    from urllib.parse import unquote

    return unquote(segment, errors="strict")


_safe = encode_name


@dataclass
class RunRecord:
    run_id: str
    source: str
    cluster: str
    window_start: str
    window_end: str
    status: str  # running | committed | failed | quarantined
    started_at: str
    finished_at: str | None = None
    rows: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    quarantine: str | None = None  # folder of the rejected batch, relative to the lake


def conform(table: LandingTable, data: pa.Table, *, where: str = "") -> pa.Table:
    """Cast ``data`` to the landing schema of ``table`` (without run columns).

    Missing optional columns become nulls; a missing required column, an unknown column, a value
    that will not cast or a null in a required column raises :class:`SchemaError` naming the table,
    column and (for values) the first offending row.
    """
    label = f"{table.name}{' (' + where + ')' if where else ''}"
    names = set(data.column_names)
    extra = sorted(names - set(table.schema.names) - {f.name for f in _run_fields()})
    if extra:
        raise SchemaError(f"{label}: unknown column(s) {extra}; expected a subset of {table.schema.names}")
    missing = [c for c in table.required if c not in names]
    if missing:
        raise SchemaError(f"{label}: missing required column(s) {missing}")
    arrays = []
    for f in table.schema:
        if f.name not in names:
            arrays.append(pa.nulls(data.num_rows, f.type))
            continue
        col = data.column(f.name)
        if not col.type.equals(f.type):
            try:
                col = _cast(col, f.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
                raise SchemaError(f"{label}: column {f.name!r} cannot be read as {f.type}: {exc}") from exc
        if f.name in table.required and col.null_count:
            row = pc.index(pc.is_null(col), True).as_py()
            raise SchemaError(f"{label}: column {f.name!r} is null at row {row} but is required")
        arrays.append(col)
    return pa.Table.from_arrays(arrays, schema=table.schema)


def _from_rows(table: LandingTable, rows: list[dict[str, Any]], where: str) -> pa.Table:
    """Rows as dicts -> Arrow, typed by the landing schema (so dicts become maps, not structs)."""
    label = f"{table.name}{' (' + where + ')' if where else ''}"
    keys: set[str] = set()
    for r in rows:
        keys.update(r)
    extra = sorted(keys - set(table.schema.names))
    if extra:
        raise SchemaError(f"{label}: unknown column(s) {extra}; expected a subset of {table.schema.names}")
    fields = [f for f in table.schema if f.name in keys]
    arrays = []
    for f in fields:
        values = [r.get(f.name) for r in rows]
        if pa.types.is_map(f.type):
            values = [list(v.items()) if isinstance(v, dict) else v for v in values]
        try:
            arrays.append(pa.array(values, type=f.type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as exc:
            bad = next((i for i, v in enumerate(values) if not _fits(v, f.type)), None)
            at = f" at row {bad} (value {values[bad]!r})" if bad is not None else ""
            raise SchemaError(f"{label}: column {f.name!r} cannot be read as {f.type}{at}: {exc}") from exc
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _fits(value: Any, type_: pa.DataType) -> bool:
    try:
        pa.array([value], type=type_)
        return True
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        return False


def _cast(col: pa.ChunkedArray, to: pa.DataType) -> pa.ChunkedArray:
    if pa.types.is_timestamp(to) and pa.types.is_timestamp(col.type) and col.type.tz is None:
        col = pc.assume_timezone(col, "UTC")
    return pc.cast(col, to)


def _run_fields() -> list[pa.Field]:
    from ingest.schema import RUN_COLUMNS

    return RUN_COLUMNS


class LakeWriter:
    """Opens a lake directory, recovering any interrupted commit first.

    ``quality`` is the data-quality gate every batch passes: a :class:`QualityGate`, the
    :class:`~gpufinops.settings.Settings` (their ``dq_on_failure`` and ``limits``), or the policy
    on failure (``"fail"``, the default, or ``"quarantine"``).
    """

    def __init__(self, root: Path | str, quality: QualityGate | OnFailure | Any = None):
        self.root = Path(root)
        if isinstance(quality, QualityGate):
            self.quality = quality
        elif hasattr(quality, "dq_on_failure"):  # the Settings: their policy and their limits
            self.quality = QualityGate.from_settings(quality)
        else:
            self.quality = QualityGate(quality or "fail")
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / _STAGING).mkdir(exist_ok=True)
        (self.root / _RUNS).mkdir(exist_ok=True)
        with self._lock():
            self._recover()
            upgrade_layout(self.root)

    # -- public ---------------------------------------------------------------------------------
    @contextlib.contextmanager
    def run(self, source: str, cluster: str, window_start: datetime, window_end: datetime) -> Iterator[LakeRun]:
        """A run over ``[window_start, window_end)``; committed when the block exits cleanly."""
        run = LakeRun(self, source, cluster, _utc(window_start), _utc(window_end))
        try:
            yield run
        except BaseException as exc:
            run.abort(f"{type(exc).__name__}: {exc}")
            raise
        run.commit()  # aborts the run itself if it fails before the commit point

    def write(self, table: str, data: pa.Table, *, source: str, cluster: str,
              window_start: datetime, window_end: datetime) -> RunRecord:
        """Write one table's slice in a run of its own."""
        with self.run(source, cluster, window_start, window_end) as run:
            run.add(table, data)
        assert run.record is not None
        return run.record

    def runs(self) -> list[RunRecord]:
        return list_runs(self.root)

    def ensure_rollups(self, progress: Any = None) -> dict[str, int]:
        """Write the hourly rollups the lake lacks (and drop orphans), under the lake lock
        (:func:`ingest.rollups.ensure_rollups`); a no-op when every raw file has its rollup."""
        with self._lock():
            return rollups.ensure_rollups(self.root, progress=progress)

    # -- internals ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        with open(self.root / ".lock", "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _save_record(self, rec: RunRecord) -> None:
        path = self.root / _RUNS / f"{rec.run_id}.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(asdict(rec), sort_keys=True))
        os.replace(tmp, path)

    def _load_record(self, run_id: str) -> RunRecord | None:
        path = self.root / _RUNS / f"{run_id}.json"
        if not path.exists():
            return None
        return RunRecord(**json.loads(path.read_text()))

    def _recover(self) -> None:
        """Finish what dead runs left (caller holds the lake lock); live runs are left alone."""
        for stage in sorted((self.root / _STAGING).iterdir()):
            with _owner_gone(stage) as gone:
                if not gone:
                    continue
                run_id = stage.name
                rec = self._load_record(run_id)
                plan_path = stage / _PLAN
                if plan_path.exists():
                    _execute_plan(self.root, json.loads(plan_path.read_text()))
                    status, error = "committed", None
                else:
                    status, error = "failed", "interrupted before commit; nothing was written"
                if rec is not None and rec.status == "running":
                    rec.status, rec.error = status, error
                    rec.finished_at = datetime.now(UTC).isoformat()
                    self._save_record(rec)
                shutil.rmtree(stage, ignore_errors=True)


@contextlib.contextmanager
def _owner_gone(stage: Path) -> Iterator[bool]:
    """True while we hold the stage's ``.alive`` lock, i.e. the run that made it has ended."""
    if not stage.is_dir():
        yield False  # a stray file, or a stage removed meanwhile: nothing to recover
        return
    try:
        fh = open(stage / _ALIVE, "a+")  # noqa: SIM115 - held for the duration of the block
    except FileNotFoundError:
        yield False
        return
    try:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        fh.close()


def run_is_alive(root: Path | str, run_id: str) -> bool:
    """Whether a process is still working on run ``run_id`` (its staging folder is locked)."""
    stage = Path(root) / _STAGING / run_id
    if not stage.is_dir():
        return False
    with _owner_gone(stage) as gone:
        return not gone and stage.is_dir()


class LakeRun:
    """Collects a run's files aside; :meth:`commit` makes them visible all together."""

    def __init__(self, writer: LakeWriter, source: str, cluster: str, start: datetime, end: datetime):
        if end <= start:
            raise SchemaError(f"run window is empty or reversed: [{start.isoformat()}, {end.isoformat()})")
        self.writer = writer
        self.source = source
        self.cluster = cluster
        self.start = start
        self.end = end
        self.run_id = f"{_stamp(datetime.now(UTC))}-{uuid.uuid4().hex[:10]}"
        self.ingested_at = datetime.now(UTC)
        self.stage = writer.root / _STAGING / self.run_id
        # Made and locked under the lake lock, so recovery never sees a stage that is not yet ours.
        with writer._lock():
            self.stage.mkdir(parents=True)
            self._alive = open(self.stage / _ALIVE, "a+")  # noqa: SIM115 - held until the run ends
            fcntl.flock(self._alive, fcntl.LOCK_EX)
        self._rejected: str | None = None  # set when the gate rejects a batch: the run cannot commit
        self._quarantine: str | None = None
        self._spans: dict[str, list[tuple[Any, Any]]] = {}  # table -> (min, max) time of each batch
        self.rows: dict[str, int] = {}
        self._parts: dict[tuple[str, str], int] = {}
        self._key = f"{_safe(source)}__{_stamp(start)}__{_stamp(end)}"
        # Hourly rollups (ingest/rollups.py) are staged beside the raw files when the lake's rollups
        # are made with this SQL (or the lake has none yet); otherwise the next build writes them.
        self._rollup_digests = rollups.table_digests()
        self._rollups_on = self._current_rollups(rollups.lake_digests(writer.root) or {})
        self.record: RunRecord | None = RunRecord(
            run_id=self.run_id, source=source, cluster=cluster,
            window_start=start.isoformat(), window_end=end.isoformat(),
            status="running", started_at=self.ingested_at.isoformat(),
        )
        writer._save_record(self.record)

    def add(self, table_name: str, data: pa.Table | pa.RecordBatch | list[dict[str, Any]], *, where: str = "") -> int:
        """Validate and stage a batch of ``table_name``; may be called many times per table.

        Calling it with an empty batch still declares the table part of the run, so a re-run that
        now yields no rows for a day clears that day's old rows.
        """
        table = get_table(table_name)
        if isinstance(data, list):
            data = _from_rows(table, data, where)
        elif isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        if self._rejected is not None:
            raise ValidationFailed(f"run {self.run_id} already rejected a batch and cannot commit: {self._rejected}")
        data = conform(table, data, where=where)
        self._check_window(table, data, where)
        self.rows.setdefault(table.name, 0)
        if data.num_rows == 0:
            return 0
        self._gate(table, data, where)
        span = pc.min_max(data.column(table.time_column))
        self._spans.setdefault(table.name, []).append((span["min"].as_py(), span["max"].as_py()))
        n = data.num_rows
        data = data.append_column(pa.field("cluster", pa.string(), nullable=False), _const_str(self.cluster, n))
        data = data.append_column(pa.field("ingest_run_id", pa.string(), nullable=False), _const_str(self.run_id, n))
        data = data.append_column(pa.field("ingested_at", TS, nullable=False), pa.repeat(pa.scalar(self.ingested_at, TS), n))
        # Casting to date32 is ~40x cheaper than formatting every timestamp as text.
        days = pc.cast(pc.cast(data.column(table.time_column), pa.timestamp("us")), pa.date32())
        uniq = pc.unique(days).to_pylist()
        for day in uniq:
            if len(uniq) == 1:
                part = data  # the common case: one batch, one day; skip the copy
            else:
                part = data.filter(pc.equal(days, day)) if day is not None else data.filter(pc.is_null(days))
            self._stage_part(table, day.isoformat() if day is not None else "None", part)
        self.rows[table.name] += n
        return n

    def _check_window(self, table: LandingTable, data: pa.Table, where: str) -> None:
        col = data.column(table.time_column)
        if data.num_rows == 0:
            return
        outside = pc.or_(pc.less(col, pa.scalar(self.start, TS)), pc.greater_equal(col, pa.scalar(self.end, TS)))
        outside = pc.fill_null(outside, True)
        if pc.any(outside).as_py():
            row = pc.index(outside, True).as_py()
            raise SchemaError(
                f"{table.name}{' (' + where + ')' if where else ''}: row {row} has {table.time_column}="
                f"{col[row].as_py()} outside the run window [{self.start.isoformat()}, {self.end.isoformat()})"
            )

    def _gate(self, table: LandingTable, data: pa.Table, where: str) -> None:
        report = self.writer.quality.validate(table.name, data)
        if not report.success:
            self._reject(table, data, report, where)

    def _gate_across_batches(self) -> None:
        """Keys unique across the run's batches of a table, checked only where batch times overlap
        (batches split by time cannot share a key: every key starts with the time column)."""
        for name, spans in self._spans.items():
            spans = sorted(spans)
            if all(prev[1] < nxt[0] for prev, nxt in zip(spans, spans[1:], strict=False)):
                continue
            files = sorted((self.stage / "new" / name).rglob("*.parquet"))
            report, dup = self.writer.quality.validate_across(name, files)
            if not report.success:
                self._reject(get_table(name), dup, report, f"across {len(spans)} batches")

    def _reject(self, table: LandingTable, data: pa.Table, report: Any, where: str) -> None:
        gate = self.writer.quality
        self._rejected = report.message
        if gate.on_failure == "quarantine":
            folder = write_quarantine(
                self.writer.root, self.run_id, table.name, data, report,
                {"run_id": self.run_id, "source": self.source, "cluster": self.cluster, "where": where,
                 "window_start": self.start.isoformat(), "window_end": self.end.isoformat()},
            )
            self._quarantine = str(folder.relative_to(self.writer.root))
        report.raise_if_failed(where)

    def _stage_part(self, table: LandingTable, day: str, part: pa.Table) -> None:
        rel = Path(table.name) / f"cluster={_safe(self.cluster)}" / f"day={day}"
        n = self._parts.get((table.name, day), 0)
        self._parts[(table.name, day)] = n + 1
        out = self.stage / "new" / rel / f"{self._key}__part{n:05d}.parquet"
        out.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(part, out, compression="zstd", row_group_size=_ROW_GROUP)
        if table.name in self._rollups_on:
            for rollup, twin in rollups.mirror(str(out.relative_to(self.stage / "new"))):
                rollups.write(rollup, part, self.stage / "new" / twin)

    def commit(self) -> RunRecord:
        writer = self.writer
        if self._rejected is None:
            try:
                self._gate_across_batches()
            except ValidationFailed as exc:
                self.abort(f"ValidationFailed: {exc}")
                raise
        if self._rejected is not None:
            err = ValidationFailed(f"run {self.run_id} rejected a batch and cannot commit: {self._rejected}")
            self.abort(f"ValidationFailed: {self._rejected}")
            raise err
        with writer._lock():
            planned = False
            try:
                # Dead runs' plans first: one of them may delete a file this plan is about to write.
                writer._recover()
                self._settle_rollups()
                plan = self._plan()
                tmp = self.stage / (_PLAN + ".tmp")
                tmp.write_text(json.dumps(plan))
                os.replace(tmp, self.stage / _PLAN)  # the commit point
                planned = True
                _execute_plan(writer.root, plan)
            except BaseException as exc:
                if not planned:
                    self.abort(f"commit failed: {type(exc).__name__}: {exc}")
                else:  # the plan stands: let go of the stage so the next recovery rolls it forward
                    self._alive.close()
                raise
            assert self.record is not None
            self.record.status = "committed"
            self.record.rows = dict(self.rows)
            self.record.finished_at = datetime.now(UTC).isoformat()
            writer._save_record(self.record)  # before the stage goes, so a kill here loses nothing
            self._release()
        return self.record

    def _current_rollups(self, have: dict[str, str]) -> set[str]:
        """The tables whose rollups this run may stage, given the lake's record ``have``: those the
        lake's rollups of are made with this SQL, or of which the lake has neither a record nor raw
        files yet."""
        root = self.writer.root
        return {t for t, d in self._rollup_digests.items()
                if have.get(t) == d or (t not in have and not rollups.has_raw_files(root, t))}

    def _settle_rollups(self) -> None:
        """Under the lake lock, before the plan: keep a table's staged rollups only if the lake's
        rollups of it are (still) made with the same SQL; a table the lake had none of gets its
        digest recorded now."""
        if not self._rollups_on:
            return
        root = self.writer.root
        have = rollups.lake_digests(root) or {}
        still = self._current_rollups(have)
        for t in self._rollups_on - still:
            for r in rollups.ROLLUPS[t]:
                shutil.rmtree(self.stage / "new" / r.table, ignore_errors=True)
        self._rollups_on &= still
        adopted = {t: self._rollup_digests[t] for t in self._rollups_on if have.get(t) != self._rollup_digests[t]}
        if adopted:
            rollups.write_lake_digest(root, {**have, **adopted})

    def abort(self, error: str) -> None:
        if self.record is not None:
            self.record.status = "quarantined" if self._quarantine else "failed"
            self.record.quarantine = self._quarantine
            self.record.error = error
            self.record.rows = dict(self.rows)
            self.record.finished_at = datetime.now(UTC).isoformat()
            self.writer._save_record(self.record)
        self._release()

    def _release(self) -> None:
        shutil.rmtree(self.stage, ignore_errors=True)
        if not self._alive.closed:
            self._alive.close()

    def _plan(self) -> dict[str, list]:
        """Deletes, trims and moves that turn the staged files into the lake's new state."""
        root = self.writer.root
        deletes: list[str] = []
        moves: list[list[str]] = []
        new_root = self.stage / "new"
        for path in sorted(new_root.rglob("*.parquet")) if new_root.exists() else []:
            moves.append([str(path.relative_to(root)), str(path.relative_to(new_root))])
        me = _safe(self.source)
        for table_name in self.rows:
            table = TABLES[table_name]
            cdir = root / table_name / f"cluster={_safe(self.cluster)}"
            if not cdir.exists():
                continue
            for ddir in cdir.iterdir():
                day = _day_of(ddir.name)
                if day is None or not _day_overlaps(day, self.start, self.end):
                    continue
                for old in ddir.glob("*.parquet"):
                    m = _FILE_RE.match(old.name)
                    if not m or m["source"] != me:
                        continue
                    o_start, o_end = _parse_stamp(m["start"]), _parse_stamp(m["end"])
                    if o_end <= self.start or self.end <= o_start:
                        continue
                    rel = str(old.relative_to(root))
                    twins = rollups.mirror(rel)
                    deletes.extend(twin for _, twin in twins)  # replaced below when the trimmed file keeps rows
                    if (o_start, o_end) == (self.start, self.end):
                        deletes.append(rel)
                        continue
                    # An overlapping window of the same source: keep only its rows outside ours.
                    kept = pq.read_table(old)
                    col = kept.column(table.time_column)
                    inside = pc.and_(pc.greater_equal(col, pa.scalar(self.start, TS)), pc.less(col, pa.scalar(self.end, TS)))
                    kept = kept.filter(pc.invert(pc.fill_null(inside, False)))
                    if kept.num_rows == 0:
                        deletes.append(rel)
                    else:
                        trimmed = self.stage / "trim" / rel
                        trimmed.parent.mkdir(parents=True, exist_ok=True)
                        pq.write_table(kept, trimmed, compression="zstd", row_group_size=_ROW_GROUP)
                        moves.append([str(trimmed.relative_to(root)), rel])
                        if table_name in self._rollups_on:
                            for rollup, twin in twins:
                                rollups.write(rollup, kept, self.stage / "trim" / twin)
                                moves.append([str((self.stage / "trim" / twin).relative_to(root)), twin])
        targets = {dst for _, dst in moves}
        deletes = [d for d in deletes if d not in targets]
        return {"deletes": deletes, "moves": moves}


def _const_str(value: str, n: int) -> pa.Array:
    """A column of one repeated string, built without a Python list of n items."""
    indices = pa.array(np.zeros(n, dtype=np.int32))
    return pa.DictionaryArray.from_arrays(indices, pa.array([value], pa.string())).cast(pa.string())


def _execute_plan(root: Path, plan: dict[str, list]) -> None:
    """Idempotent: a plan interrupted halfway can be executed again."""
    for src, dst in plan["moves"]:
        s, d = root / src, root / dst
        if s.exists():
            d.parent.mkdir(parents=True, exist_ok=True)
            os.replace(s, d)
    for rel in plan["deletes"]:
        with contextlib.suppress(FileNotFoundError):
            (root / rel).unlink()


def _day_of(dirname: str) -> date | None:
    if not dirname.startswith("day="):
        return None
    try:
        return date.fromisoformat(dirname[4:])
    except ValueError:
        return None


def _day_overlaps(day: date, start: datetime, end: datetime) -> bool:
    d0 = datetime(day.year, day.month, day.day, tzinfo=UTC)
    return d0 < end and start < d0 + timedelta(days=1)


def upgrade_layout(root: Path) -> list[tuple[str, str]]:
    """Bring a lake written with the old, lossy folder names to layout 2 (caller holds the lock).

    Layout 1 turned every run of characters outside ``[A-Za-z0-9.-]`` into ``-`` (``a/b`` and
    ``a-b`` shared a folder; ``_billing`` became ``billing``). Every file carries its cluster in
    its rows, so each file whose folder is not the encoding of that cluster is moved to the
    folder that is. FOCUS files of the old (period, provider) slices are split per billing
    account into the new slices (:mod:`ingest.focus.land`). Idempotent; the marker
    ``_layout.json`` is written last, so a crash midway is finished by the next writer. Returns
    the (old, new) relative paths moved."""
    marker = root / _LAYOUT
    if marker.exists():
        return []
    moved: list[tuple[str, str]] = []
    sources = {r.run_id: r.source for r in list_runs(root)}
    for table in TABLES:
        tdir = root / table
        if not tdir.is_dir():
            continue
        for path in sorted(tdir.glob("cluster=*/day=*/*.parquet")):
            first = pq.read_table(path, columns=["cluster", "ingest_run_id"]).slice(0, 1).to_pylist()
            m = _FILE_RE.match(path.name)
            if not first or not m:
                continue
            source = sources.get(first[0]["ingest_run_id"])
            new_dir = tdir / f"cluster={encode_name(first[0]['cluster'])}" / path.parent.name
            if table == "billing_focus" and source is not None:
                from ingest.focus.land import split_legacy_slice  # the rule of the slice key lives there

                parts = split_legacy_slice(path, source)  # None: already a file of the new slices
                if parts is not None:
                    for new_source, part in parts:
                        dst = new_dir / f"{encode_name(new_source)}__{m['start']}__{m['end']}__part{m['part']}.parquet"
                        dst.parent.mkdir(parents=True, exist_ok=True)
                        tmp = dst.with_suffix(".parquet.tmp")
                        pq.write_table(part, tmp, compression="zstd", row_group_size=_ROW_GROUP)
                        os.replace(tmp, dst)
                        moved.append((str(path.relative_to(root)), str(dst.relative_to(root))))
                    path.unlink()
                    continue
            name = path.name if source is None else (
                f"{encode_name(source)}__{m['start']}__{m['end']}__part{m['part']}.parquet")
            dst = new_dir / name
            if dst != path:
                dst.parent.mkdir(parents=True, exist_ok=True)
                os.replace(path, dst)
                moved.append((str(path.relative_to(root)), str(dst.relative_to(root))))
        for cdir in tdir.glob("cluster=*"):
            for ddir in list(cdir.glob("day=*")):
                with contextlib.suppress(OSError):
                    ddir.rmdir()  # only when empty
            with contextlib.suppress(OSError):
                cdir.rmdir()
    tmp = marker.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"layout": LAYOUT_VERSION, "moved": len(moved)}))
    os.replace(tmp, marker)
    return moved


def list_runs(root: Path | str) -> list[RunRecord]:
    runs_dir = Path(root) / _RUNS
    if not runs_dir.exists():
        return []
    out = [RunRecord(**json.loads(p.read_text())) for p in runs_dir.glob("*.json")]
    return sorted(out, key=lambda r: r.started_at)


def partition_files(root: Path | str, table: str, *, cluster: str | None = None) -> list[Path]:
    base = Path(root) / table
    if not base.exists():
        return []
    pattern = f"cluster={_safe(cluster)}/day=*/*.parquet" if cluster else "cluster=*/day=*/*.parquet"
    return sorted(base.glob(pattern))


FLEET_TABLES = ("k8s_pods", "k8s_nodes", "k8s_namespaces", "gpu_samples", "container_usage")


def lake_clusters(root: Path | str, tables: tuple[str, ...] = FLEET_TABLES) -> list[str]:
    """Every cluster with a partition folder (``<table>/cluster=<c>``) in one of the fleet's tables
    (the Kubernetes snapshots, DCGM and usage samples: not the price list's ``_global``)."""
    base = Path(root)
    return sorted({decode_name(d.name.split("=", 1)[1]) for t in tables for d in (base / t).glob("cluster=*")
                   if d.is_dir()})
