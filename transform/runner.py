"""Run the dbt project programmatically (``dbt build``: seeds, models, tests) with vars from Settings."""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import logging
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpufinops.errors import ConfigError, TerminalError
from gpufinops.project import PROJECT_DIR
from gpufinops.settings import Settings
from gpufinops.warehouse import published_version, write_build_record
from transform import schedule
from transform.publish import BuildLocked, build_lock, discard, new_version, prepare, publish

__all__ = ["BuildFailed", "BuildLocked", "BuildResult", "ManifestCache", "NodeResult", "PROJECT_DIR", "dbt_common_args", "dbt_environment", "dbt_vars",
           "forget_stale_parse", "kept_staging_views", "project_content_digest", "project_files_digest", "record_parse", "run_build", "seed_digest", "use_manifest_cache"]

_FAILED = {"error", "fail", "runtime error"}
_TEST_TYPES = {"test", "unit_test"}
_SEED_STATE = "seeds.json"  # under <home>/dbt: the seed digest the warehouse was last built with
_log = logging.getLogger(__name__)


class BuildFailed(TerminalError):
    """dbt reported failed models or tests; the message lists them."""

    def __init__(self, message: str, result: BuildResult):
        super().__init__(message)
        self.result = result


@dataclass(frozen=True)
class NodeResult:
    name: str
    resource_type: str  # model | seed | test | unit_test | ...
    status: str  # success | pass | fail | error | warn | skipped ...
    seconds: float
    message: str | None = None
    failures: int | None = None


@dataclass
class BuildResult:
    success: bool
    warehouse: Path
    seconds: float
    full_refresh: bool
    nodes: list[NodeResult] = field(default_factory=list)
    note: str | None = None  # why an incremental build ran as a full one (seed files changed)
    tests_scope: str = "all"  # "invariants": an incremental build ran the singular data tests only
    version: str | None = None  # the published build version
    copy_seconds: float = 0.0  # copying the live version before an incremental build
    rollups: dict[str, int] = field(default_factory=dict)  # rollup files written / removed first
    rollup_seconds: float = 0.0

    @property
    def failed(self) -> list[NodeResult]:
        return [n for n in self.nodes if n.status in _FAILED]

    def count(self, resource_type: str, status: str | None = None) -> int:
        return sum(1 for n in self.nodes if n.resource_type == resource_type and (status is None or n.status == status))


def dbt_vars(settings: Settings) -> dict[str, Any]:
    """The dbt vars the models read, from Settings (see dbt_project.yml for their meaning)."""
    from ingest.lake import lake_clusters

    cost = settings.cost
    return {
        "lake_root": str(Path(settings.lake_dir).resolve()),
        # every cluster the lake holds: lets an incremental model bound its window by one constant
        # (macro incremental_since) when no cluster is new to it
        "lake_clusters": lake_clusters(settings.lake_dir),
        "snapshot_interval_s": settings.snapshot_interval_s,
        "coverage_cap_factor": settings.coverage_cap_factor,
        "split_method": cost.split_method,
        "residual_floor_fraction": cost.residual_floor_fraction,
        "gpu_weight": cost.gpu_weight,
        "vcpu_weight": cost.vcpu_weight,
        "gib_weight": cost.gib_weight,
        "shared_namespaces": list(cost.shared_namespaces),
        "fixed_overhead_usd_per_hour": dict(cost.fixed_overhead_usd_per_hour),
        "shared_cost_method": cost.shared_cost_method,
        "distribute_unallocated": cost.distribute_unallocated,
        "team_label": settings.attribution.team_label,
        "tenant_label": settings.attribution.tenant_label,
    }


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """dbt's env_var() reads os.environ: set ours for the invocation only."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _release_duckdb() -> None:
    """dbt-duckdb keeps its DuckDB instance open in-process after an invocation; close it so this
    process (the summary, the next invocation, a reader) can open the warehouse again."""
    try:
        from dbt.adapters.duckdb.connections import DuckDBConnectionManager
    except ImportError:  # pragma: no cover - dbt-duckdb is a pinned dependency
        return
    with DuckDBConnectionManager._LOCK:
        env, DuckDBConnectionManager._ENV = DuckDBConnectionManager._ENV, None
    if env is not None:
        with contextlib.suppress(Exception):
            env.close()
    gc.collect()


class ManifestCache:
    """The parsed project (dbt's Manifest) kept in memory by a long-lived build worker
    (transform/worker.py), so a build skips dbt's parse and the load of its partial-parse file.

    Keyed by the dbt arguments that shape the parse (project, profile, target path, ``--vars``: vars
    are rendered into configs at parse time, e.g. the capacity model's ``meta``), by the build's
    environment (the warehouse path the profile names), and by the project files' names, sizes and
    modification times; any change parses again. One entry: the hourly build asks for the same one."""

    def __init__(self) -> None:
        self._key: tuple[Any, ...] | None = None
        self._manifest: Any = None
        self.parses = 0

    def get(self, common: Sequence[str]) -> Any:
        key = (tuple(common), os.environ.get("GPUFINOPS_WAREHOUSE"), project_files_digest())
        if key != self._key or self._manifest is None:
            # the previous parse's objects become collectable again, the new ones are frozen below
            gc.unfreeze()
            self._key = self._manifest = None
            manifest = _parse(common)
            if manifest is None:
                return None  # the build itself parses and reports what is wrong
            self._key, self._manifest = key, manifest
            self.parses += 1
            # Out of the collector's sight: the parsed project is millions of long-lived objects, and
            # the full collection after every dbt invocation (_release_duckdb) walked all of them.
            gc.freeze()
        return self._manifest


_manifest_cache: ManifestCache | None = None  # set in a build worker (use_manifest_cache)


def _parse(common: Sequence[str]) -> Any:
    """The parsed project, for a build of several dbt invocations to share (None: each parses, and
    reports what is wrong)."""
    from dbt.cli.main import dbtRunner

    target = _target_path(common)
    forget_stale_parse(target)
    try:
        res = dbtRunner().invoke(["parse", *common, "--quiet", "--no-write-json"])
    finally:
        _release_duckdb()
        record_parse(target)
    return res.result if res.success else None


def use_manifest_cache(cache: ManifestCache | None) -> None:
    """Builds in this process reuse the parsed project from ``cache`` (None: parse every build)."""
    global _manifest_cache
    _manifest_cache = cache


def _project_files(project_dir: Path) -> list[Path]:
    """The files dbt parses the project from, in a fixed order."""
    out: list[Path] = []
    for sub in ("dbt_project.yml", "profiles.yml", "models", "macros", "seeds", "tests/dbt"):
        root = project_dir / sub
        out += [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    return out


def project_files_digest(project_dir: Path = PROJECT_DIR) -> str:
    """A digest of the dbt project's files by name, size and modification time (cheap: no reads)."""
    h = hashlib.sha256()
    for p in _project_files(project_dir):
        st = p.stat()
        h.update(f"{p.relative_to(project_dir)}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return h.hexdigest()


PARSE_RECORD = "gpufinops-project.sha256"  # beside dbt's partial_parse.msgpack: the project it was parsed from


def project_content_digest(project_dir: Path = PROJECT_DIR) -> str:
    """sha256 of the dbt project's files by name and content (what its parse is made of)."""
    h = hashlib.sha256()
    for p in _project_files(project_dir):
        h.update(str(p.relative_to(project_dir)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def forget_stale_parse(target: Path, project_dir: Path = PROJECT_DIR) -> bool:
    """Remove dbt's saved parse in ``target`` unless this code's last dbt invocation made it from
    these project files; the next invocation then parses the project whole. True when one was removed.

    dbt's partial parsing re-reads only the files whose checksums changed, and it does not always
    apply what changed: after an upgrade that removed a post-hook from a Python model's YAML and
    the macro it called, the next parse of the large bench home still carried the hook (twenty-second
    session, docs/bench.md), and every build failed on the missing macro. A whole parse costs a few
    seconds once per change of the project. The record (:data:`PARSE_RECORD`, written by
    :func:`record_parse` after each invocation) holds the project's digest; a saved parse newer than
    it was written by something else (another version of gpufinops on the same home)."""
    record, saved = target / PARSE_RECORD, target / "partial_parse.msgpack"
    try:
        fresh = (record.read_text().strip() == project_content_digest(project_dir)
                 and (not saved.exists() or saved.stat().st_mtime_ns <= record.stat().st_mtime_ns))
    except OSError:
        fresh = False
    if fresh or not saved.exists():
        return False
    saved.unlink(missing_ok=True)
    _log.info("the saved dbt parse in %s is not of these project files: parsing the project whole", target)
    return True


def record_parse(target: Path, project_dir: Path = PROJECT_DIR) -> None:
    """After a dbt invocation: the saved parse in ``target`` is of these project files."""
    target.mkdir(parents=True, exist_ok=True)
    record = target / PARSE_RECORD
    tmp = record.with_suffix(".tmp")
    tmp.write_text(project_content_digest(project_dir) + "\n")
    tmp.replace(record)


def _target_path(args: Sequence[str]) -> Path:
    return Path(args[list(args).index("--target-path") + 1])


def _invoke(args: list[str], manifest: Any = None) -> tuple[bool, list[NodeResult], BaseException | None]:
    from dbt.cli.main import dbtRunner

    try:
        res = dbtRunner(manifest=manifest).invoke(args)
    finally:
        _release_duckdb()
    nodes: list[NodeResult] = []
    results = getattr(res.result, "results", None) or []
    for r in results:
        node = getattr(r, "node", None)
        if node is None:  # a run-operation's result names no node
            continue
        nodes.append(
            NodeResult(
                name=node.name,
                resource_type=str(getattr(node.resource_type, "value", node.resource_type)),
                status=str(getattr(r.status, "value", r.status)).lower(),
                seconds=float(r.execution_time or 0.0),
                message=r.message,
                failures=r.failures,
            )
        )
    return bool(res.success), nodes, res.exception


def seed_digest(project_dir: Path = PROJECT_DIR) -> str:
    """sha256 of the seed files and dbt_project.yml (the seeds' column types): what the seed tables
    in a warehouse were loaded from."""
    h = hashlib.sha256()
    for path in [project_dir / "dbt_project.yml", *sorted((project_dir / "seeds").glob("*.csv"))]:
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def views_digest(variables: dict[str, Any], project_dir: Path = PROJECT_DIR) -> str:
    """sha256 of what the SQL of the intermediate views depends on: the models and macros, the
    project file and the vars (but ``lake_clusters``, which only bounds incremental windows). Their
    SQL reads no lake listing and no watermark, so while this is unchanged, the views a copied live
    version holds are the ones a build would create again."""
    h = hashlib.sha256()
    for path in [project_dir / "dbt_project.yml",
                 *sorted(p for sub in ("models", "macros") for p in (project_dir / sub).rglob("*") if p.is_file())]:
        h.update(str(path.relative_to(project_dir)).encode() + b"\0" + path.read_bytes() + b"\0")
    h.update(json.dumps({k: v for k, v in variables.items() if k != "lake_clusters"}, sort_keys=True, default=str).encode())
    return h.hexdigest()


INTERMEDIATE_VIEWS = "config.materialized:view,path:models/intermediate"  # dbt selector (an intersection)
_LAKE_GLOB = "/cluster=*/day=*/*.parquet'"  # how a staging view's SQL names its files (macro lake_glob_pattern)


def kept_staging_views(warehouse: Path) -> list[str]:
    """The staging views of ``warehouse`` an hourly build need not make again: those that read their
    landing table's files by a glob (macro lake_glob_relation) and take every landing column from the
    files. Such a view reads whatever has landed since it was made; its SQL changes only with the
    models, macros and vars (the views digest) or with the files' columns, which the lake writer
    conforms to the landing schema. A view of a table that had no files (a typed empty relation), or
    whose files lacked a landing column (a null column), is made again."""
    import duckdb

    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        rows = con.execute("select view_name, sql from duckdb_views() where not internal").fetchall()
    finally:
        con.close()
    return sorted(name for name, sql in rows if name.startswith("stg_") and _LAKE_GLOB in sql
                  and "CAST(NULL AS" not in sql.upper())


def _seed_state(work: Path, link: Path, key: str = "digest") -> str | None:
    """The seed digest (``key`` views: the views digest) recorded by the last successful build of the
    live warehouse (None: unknown)."""
    try:
        state = json.loads((work / _SEED_STATE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict) or not link.is_file():
        return None
    if "version" in state:
        if state["version"] != published_version(link):
            return None
    elif state.get("warehouse") != str(link) or link.is_symlink():
        return None  # the record of a plain warehouse file from before atomic publish
    digest = state.get(key)
    return digest if isinstance(digest, str) else None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def run_build(
    settings: Settings,
    *,
    full_refresh: bool = False,
    select: Sequence[str] | None = None,
    extra_vars: dict[str, Any] | None = None,
    unit_tests: bool = False,
    engine: str | None = None,
    all_tests: bool = False,
    rollup_progress: Any = None,
) -> BuildResult:
    """``dbt build`` (seeds, models, data tests; incremental unless ``full_refresh``) into a new version
    of the warehouse, published atomically when it succeeds (``transform.publish``).

    ``dbt build`` loads the seeds itself, in DAG order, so no separate ``dbt seed`` parse is paid.
    dbt unit tests (the formula pins) run only with ``unit_tests=True`` (CI, the test suite): they
    check the SQL, not the data.

    The build holds ``warehouse.lock``: a second build started meanwhile raises
    :class:`~transform.publish.BuildLocked` naming the first. An incremental build copies the live
    version and builds on the copy (``result.copy_seconds``); a full build starts from an empty file.
    Readers keep the live version until the rename; a failed or killed build leaves it as it was.
    Every attempt is recorded in ``warehouse.build.json`` (``gpufinops.warehouse.last_build``).

    An incremental build skips the seeds when their files (and dbt_project.yml) are unchanged since
    the last successful build of the live warehouse (digest in ``<home>/dbt/seeds.json``, which only a
    successful build rewrites); when they changed, or the digest is unknown, it runs as a full build
    instead (``result.full_refresh`` and ``result.note`` say so). An incremental build also writes no
    JSON artifacts (manifest, run_results) to ``<home>/dbt/target``; a full build does. Raises
    :class:`BuildFailed` listing every failed model and test (with dq_on_failure=quarantine, failing
    data tests are reported in the result but do not raise; model errors always do).

    ``engine`` (default: Settings.engine) ``spark`` builds on Spark instead (:func:`_spark_build`).

    An incremental build runs only the singular data tests (the invariants in tests/dbt) when the
    ``hourly_tests`` setting is ``invariants`` (the default) and ``all_tests`` is false; a full build
    runs every data test (``result.tests_scope`` says which ran).
    """
    lake = Path(settings.lake_dir)
    if not lake.is_dir():
        raise ConfigError(f"lake {lake} does not exist: ingest data (or run `gpufinops demo`) first")
    t0 = time.perf_counter()
    made = _ensure_rollups(lake, rollup_progress)
    rollup_seconds = time.perf_counter() - t0
    if (engine or settings.engine) == "spark":
        result = _spark_build(settings, full_refresh=full_refresh, select=select, extra_vars=extra_vars)
        result.rollups, result.rollup_seconds = made, rollup_seconds
        return result
    link = Path(os.path.abspath(settings.warehouse_path))
    link.parent.mkdir(parents=True, exist_ok=True)
    work = Path(settings.home).resolve() / "dbt"
    work.mkdir(parents=True, exist_ok=True)
    with build_lock(link) as me:
        version = new_version()
        record: dict[str, Any] = {**me, "status": "running", "version": version,
                                  "served_version": published_version(link)}
        write_build_record(link, record)
        try:
            result = _build(settings, link, work, version, full_refresh=full_refresh, select=select,
                            extra_vars=extra_vars, unit_tests=unit_tests, all_tests=all_tests)
        except BaseException as exc:
            failed = exc.result.failed if isinstance(exc, BuildFailed) else []
            record.update(status="failed", finished_at=_now(), served_version=published_version(link),
                          failed=[f"{n.resource_type} {n.name}: {n.status}" for n in failed],
                          error=(None if failed else _short(str(exc) or type(exc).__name__, 300)))
            write_build_record(link, record)
            raise
        result.rollups, result.rollup_seconds = made, rollup_seconds
        record.update(status="success", finished_at=_now(), served_version=version,
                      full_refresh=result.full_refresh, seconds=round(result.seconds, 3),
                      copy_seconds=round(result.copy_seconds, 3))
        write_build_record(link, record)
        return result


def _ensure_rollups(lake: Path, progress: Any) -> dict[str, int]:
    """The lake's hourly rollups (ingest/rollups.py) for every raw file, before dbt reads them: the
    lake writer writes them at landing, so this only writes those of a lake from before rollups, or
    all of them after the rollup SQL changed."""
    from ingest.lake import LakeWriter

    made = LakeWriter(lake).ensure_rollups(progress)
    if made["written"] or made["removed"]:
        _log.info("hourly rollups: %d written, %d removed (%s)", made["written"], made["removed"], lake)
    return made


def _build(settings: Settings, link: Path, work: Path, version: str, *, full_refresh: bool,
           select: Sequence[str] | None, extra_vars: dict[str, Any] | None, unit_tests: bool,
           all_tests: bool = False) -> BuildResult:
    variables = dbt_vars(settings) | (extra_vars or {})
    digest = seed_digest()
    note = None
    skip_seeds = False
    if not full_refresh and not select:
        recorded = _seed_state(work, link)
        if recorded == digest:
            skip_seeds = True
        elif link.is_file():
            full_refresh = True
            note = ("seed files changed since the last build: full rebuild" if recorded
                    else "no record of the seeds this warehouse was built with: full rebuild")
            _log.warning("%s (%s)", note, link)
    invariants_only = not (full_refresh or select or all_tests or settings.hourly_tests == "all")
    views = views_digest(variables)
    # an hourly build keeps the live version's intermediate views when nothing they are made of changed
    keep_views = not (full_refresh or select) and _seed_state(work, link, "views") == views
    served = published_version(link)
    target, copy_seconds = prepare(link, version, copy=not full_refresh, stage=True)
    try:
        if not full_refresh:
            _write_late_windows(target, Path(settings.lake_dir), served)
        keep = [INTERMEDIATE_VIEWS, *kept_staging_views(target)] if keep_views else []
        result = _dbt(settings, work, target, variables, full_refresh=full_refresh, select=select,
                      skip_seeds=skip_seeds, unit_tests=unit_tests, invariants_only=invariants_only,
                      keep=keep)
    except BaseException:
        discard(target)
        raise
    publish(link, target, version)
    if not select:
        (work / _SEED_STATE).write_text(json.dumps({"version": version, "digest": digest, "views": views}))
    result.warehouse, result.note, result.version, result.copy_seconds = link, note, version, copy_seconds
    return result


LATE_TABLES = ("serving_requests",)  # landing tables whose models widen their window to late runs


def late_windows(lake: Path, served: str | None) -> list[tuple[str, str, datetime]]:
    """(table, cluster, window start) of every committed lake run of a :data:`LATE_TABLES` table that
    finished after the build of the live version ``served`` started (its name is that start time):
    data that run may not have seen. ``served`` unknown or legacy: every run."""
    from ingest.lake import list_runs

    try:
        since = datetime.strptime(served or "", "%Y%m%dT%H%M%S%fZ").replace(tzinfo=UTC)
    except ValueError:
        since = None
    out = []
    for run in list_runs(lake):
        if run.status != "committed" or not run.finished_at:
            continue
        if since is not None and datetime.fromisoformat(run.finished_at) <= since:
            continue
        start = datetime.fromisoformat(run.window_start).astimezone(UTC).replace(tzinfo=None)
        out += [(t, run.cluster, start) for t in LATE_TABLES if t in run.rows]
    return out


def _write_late_windows(target: Path, lake: Path, served: str | None) -> None:
    """Table ``_late_windows`` (table_name, cluster, since) in the version an incremental build is
    about to build: per landing table and cluster, the oldest window start of the runs landed since
    the live version was built (:func:`late_windows`). Models of late-landing sources (macro
    late_window_starts) rebuild from there when it is older than their usual cutoff."""
    import duckdb

    rows = late_windows(lake, served)
    con = duckdb.connect(str(target))
    try:
        con.execute("create or replace table _late_windows (table_name varchar, cluster varchar, since timestamp)")
        if rows:
            con.executemany("insert into _late_windows values (?, ?, ?)", rows)
    finally:
        con.close()


def _spark_build(settings: Settings, *, full_refresh: bool, select: Sequence[str] | None,
                 extra_vars: dict[str, Any] | None) -> BuildResult:
    """The same ``dbt build`` on Spark (target ``spark``, transform/spark.py): Parquet tables under
    ``<home>/spark/warehouse``. After a successful build a DuckDB file of views over those tables is
    published as the new version of ``Settings.warehouse_path`` (the same atomic publish as a DuckDB
    build), so the read model serves the Spark-built marts unchanged. Seeds are always loaded."""
    from transform import spark as spark_engine

    link = Path(os.path.abspath(settings.warehouse_path))
    link.parent.mkdir(parents=True, exist_ok=True)
    work = Path(settings.home).resolve() / "spark" / "dbt"
    work.mkdir(parents=True, exist_ok=True)
    with build_lock(link):
        spark_vars, env, session = spark_engine.prepare_build(settings)
        variables = dbt_vars(settings) | spark_vars | (extra_vars or {})
        result = _dbt(settings, work, link, variables, full_refresh=full_refresh, select=select, skip_seeds=False,
                      unit_tests=False, dbt_target=spark_engine.SPARK_TARGET, extra_env=env)
        version = new_version()
        target, _ = prepare(link, version, copy=False)
        try:
            spark_engine.write_serving_views(session, target)
            # the SQL macros a DuckDB build publishes (faces' idle_pct, the evidence windows), over the views
            with _environment({"GPUFINOPS_WAREHOUSE": str(target), "DBT_LOG_PATH": str(work / "logs"),
                               "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}):
                ok, _, exc = _invoke(["run-operation", "publish_serving_macros", "--project-dir", str(PROJECT_DIR),
                                      "--profiles-dir", str(PROJECT_DIR), "--target-path", str(work / "serving-target"),
                                      "--vars", json.dumps(variables), "--quiet"])
            if not ok:
                raise BuildFailed(f"publishing the serving macros failed: {exc}", result)
        except BaseException:
            discard(target)
            raise
        publish(link, target)
    result.warehouse, result.version = link, version
    return result


def dbt_common_args(work: Path, variables: dict[str, Any], dbt_target: str | None = None) -> list[str]:
    """The arguments every dbt invocation of a build shares (and a build worker's parse uses)."""
    return [
        "--project-dir", str(PROJECT_DIR),
        "--profiles-dir", str(PROJECT_DIR),
        "--target-path", str(work / "target"),
        "--vars", json.dumps(variables),
        "--log-level-file", "info",
        *(["--target", dbt_target] if dbt_target else []),
    ]


def dbt_environment(settings: Settings, work: Path, warehouse: Path, *, full_refresh: bool,
                    select: Sequence[str] | None = None) -> dict[str, str]:
    """The environment of a build's dbt invocations: profiles.yml reads the warehouse path from it,
    and the dbt-duckdb plugin transform/duckdb_settings.py the DuckDB memory limit, block allocator
    memory and threads when dbt opens the warehouse (outside the rendered profile, which dbt hashes into its saved
    parse: the two kinds of build share one parse)."""
    whole = bool(full_refresh or select)
    return {"GPUFINOPS_WAREHOUSE": str(warehouse), "DBT_LOG_PATH": str(work / "logs"),
            "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
            "GPUFINOPS_DUCKDB_MEMORY_LIMIT": os.environ.get("GPUFINOPS_DUCKDB_MEMORY_LIMIT") or (
                settings.build_memory_limit if whole else settings.hourly_memory_limit),
            "GPUFINOPS_DUCKDB_BLOCK_ALLOCATOR_MEMORY": os.environ.get("GPUFINOPS_DUCKDB_BLOCK_ALLOCATOR_MEMORY") or (
                settings.build_block_allocator_memory if whole else settings.hourly_block_allocator_memory),
            "GPUFINOPS_DUCKDB_THREADS": os.environ.get("GPUFINOPS_DUCKDB_THREADS") or str(duckdb_threads(settings, whole=whole))}


def duckdb_threads(settings: Settings, *, whole: bool) -> int:
    """DuckDB's threads for a build's dbt invocations (Settings.build_duckdb_threads): a full build
    shares the cores among dbt's threads; an hour runs settings.hourly_duckdb_threads."""
    if not whole:
        return settings.hourly_duckdb_threads
    if settings.build_duckdb_threads is not None:
        return settings.build_duckdb_threads
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // settings.full_build_threads)


def _dbt(settings: Settings, work: Path, warehouse: Path, variables: dict[str, Any], *, full_refresh: bool,
         select: Sequence[str] | None, skip_seeds: bool, unit_tests: bool, dbt_target: str | None = None,
         extra_env: dict[str, str] | None = None, invariants_only: bool = False,
         keep: Sequence[str] = ()) -> BuildResult:
    """The build's dbt invocations (:func:`_dbt_invocations`), from a saved parse of these project
    files only (:func:`forget_stale_parse`)."""
    target = work / "target"
    forget_stale_parse(target)
    try:
        return _dbt_invocations(settings, work, warehouse, variables, full_refresh=full_refresh, select=select,
                                skip_seeds=skip_seeds, unit_tests=unit_tests, dbt_target=dbt_target, extra_env=extra_env,
                                invariants_only=invariants_only, keep=keep)
    finally:
        record_parse(target)


def _dbt_invocations(settings: Settings, work: Path, warehouse: Path, variables: dict[str, Any], *, full_refresh: bool,
                     select: Sequence[str] | None, skip_seeds: bool, unit_tests: bool, dbt_target: str | None = None,
                     extra_env: dict[str, str] | None = None, invariants_only: bool = False,
                     keep: Sequence[str] = ()) -> BuildResult:
    common = dbt_common_args(work, variables, dbt_target)
    env = {**dbt_environment(settings, work, warehouse, full_refresh=full_refresh, select=select), **(extra_env or {})}
    # A whole DuckDB build makes every model first, longest remaining chain first, and tests after:
    # in one `dbt build` a model waited for its parents' data tests, and the big marts started late
    # and ended alone (docs/bench.md). A failed test still fails the build before it is published.
    tests_after = full_refresh and not select and dbt_target is None
    started = time.monotonic()
    with _environment(env):
        args = ["build", *common, "--quiet"]
        if full_refresh:
            args.append("--full-refresh")
            if dbt_target is None:
                args += ["--threads", str(settings.full_build_threads)]
        # unit tests run after the build: an incremental model's unit test reads the columns of
        # the built model (dbt needs the relation to exist)
        args += ["--exclude-resource-type", "unit_test", *(["test"] if tests_after else []), *(["seed"] if skip_seeds else [])]
        if not full_refresh:
            args.append("--no-write-json")  # nothing reads the artifacts; a full build leaves them
        if select:
            args += ["--select", *select]
        exclude = [*(["test_type:generic"] if invariants_only else []),  # the singular invariants still run
                   *keep]  # views the copied live version holds as this build would make them
        if exclude:
            args += ["--exclude", *exclude]
        manifest = _manifest_cache.get(common) if _manifest_cache is not None and dbt_target is None else None
        if tests_after:
            manifest = manifest if manifest is not None else _parse(common)
            with schedule.longest_chain_first(schedule.load_node_seconds(work), settings.full_build_threads):
                ok, nodes, exc = _invoke(args, manifest)
            if ok:  # a failed build keeps the last whole record
                schedule.record_node_seconds(work, nodes)
        else:
            ok, nodes, exc = _invoke(args, manifest)
        if exc is not None:
            raise BuildFailed(f"dbt build could not run: {exc}", BuildResult(False, warehouse, 0.0, full_refresh, nodes))
        if tests_after and ok:
            # the data tests and, when asked, the unit tests, on dbt's threads (the JSON artifacts stay the models')
            ok, tested, exc = _invoke(["test", *common, "--quiet", "--threads", str(settings.full_build_threads), "--no-write-json",
                                       *([] if unit_tests else ["--exclude-resource-type", "unit_test"])], manifest)
            nodes += tested
            if exc is not None:
                raise BuildFailed(f"dbt tests could not run: {exc}", BuildResult(False, warehouse, 0.0, full_refresh, nodes))
        elif unit_tests and ok:
            ok, tested, exc = _invoke(["test", *common, "--quiet", "--select", "test_type:unit"], manifest)
            nodes += tested
            if exc is not None:
                raise BuildFailed(f"dbt unit tests could not run: {exc}", BuildResult(False, warehouse, 0.0, full_refresh, nodes))
    result = BuildResult(ok, warehouse, time.monotonic() - started, full_refresh, nodes,
                         tests_scope="invariants" if invariants_only else "all")
    failed = result.failed
    hard = [n for n in failed if n.resource_type not in _TEST_TYPES or settings.dq_on_failure == "fail"]
    if hard or (not ok and not failed):
        lines = [f"  {n.resource_type} {n.name}: {n.status}{' (' + str(n.failures) + ' rows)' if n.failures else ''}"
                 f"{' - ' + _short(n.message) if n.message else ''}" for n in failed]
        raise BuildFailed(
            f"warehouse build failed ({len(failed)} failed of {len(nodes)}); the live warehouse is unchanged:\n"
            + "\n".join(lines or ["  (see dbt logs in " + str(work / 'logs') + ")"]),
            result,
        )
    return result


def _short(message: str, limit: int = 400) -> str:
    message = " ".join(str(message).split())
    return message if len(message) <= limit else message[: limit - 3] + "..."
