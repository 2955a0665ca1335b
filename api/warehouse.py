"""The API's reads of the warehouse marts, scoped by the caller's teams.

Every read goes through the kernel's read model (``gpufinops.warehouse.Reader``): one read-only
connection to the published build version, a cursor per query. ``gpufinops build`` writes a new version
file and publishes it atomically, so the API never blocks a build nor waits for one: the first query
after a publish opens the new version, and the old connection closes when its last cursor is done.
(Opening a DuckDB database costs about 25-40 ms of CPU with the GIL held, against about 0.4 ms for a
cursor, so the connection is kept for as long as its version is live.)

What never changes for one version is cached under its stamp, so a publish invalidates it: the tables,
the first/last hour and day, the workload index (id -> cluster, namespace, kind, name, team), and the
hours with data per day of the workloads asked about. Windows of whole days read ``fct_workload_daily``
(a per-day sum of the hourly mart) instead of ``fct_gpu_allocation_hourly``. Idle % is the warehouse's
``idle_pct`` macro over measured GPU-hours (``gpufinops.views.names``). Every filter value travels as a
bound parameter, never inside the SQL text.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb

from gpufinops.appdb.ids import workload_id
from gpufinops.errors import BadRequest
from gpufinops.views.names import SYNTHETIC_LINES, idle_pct_sql
from gpufinops.warehouse import Reader, Stamp

__all__ = ["WarehouseReader", "WorkloadRef", "parse_window", "empty_unit_cost", "MAX_WINDOW"]

MAX_WINDOW = timedelta(days=400)
_WINDOW = re.compile(r"^([1-9][0-9]{0,4})([hdw])$")


def parse_window(text: str) -> timedelta:
    """``24h`` / ``7d`` / ``2w`` -> timedelta (at most 400 days)."""
    m = _WINDOW.match(text.strip())
    if not m:
        raise BadRequest(f"window {text!r} must be a number and a unit h, d or w (e.g. 24h, 7d, 2w)")
    n, unit = int(m.group(1)), m.group(2)
    delta = {"h": timedelta(hours=n), "d": timedelta(days=n), "w": timedelta(weeks=n)}[unit]
    if delta > MAX_WINDOW:
        raise BadRequest(f"window {text!r} is longer than {MAX_WINDOW.days} days")
    return delta


def empty_unit_cost() -> dict[str, Any]:
    """The serving fields of a workload cost when the window has no hours."""
    return {"requests": None, "tokens": None, "cost_per_1k_requests": None, "cost_per_1m_tokens": None, "models": []}


@dataclass(frozen=True)
class WorkloadRef:
    """A workload discovered in the warehouse."""

    id: str
    cluster: str
    namespace: str
    kind: str
    name: str
    team: str | None
    tenant: str | None
    tier: str | None


def _version(stamp: Stamp) -> str:
    return Path(stamp[0]).stem


def _utc(value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return datetime.fromisoformat(str(value)).astimezone(UTC)


def _day(value: Any) -> date | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    return date.fromisoformat(str(value)[:10])


@dataclass(frozen=True)
class _Facts:
    """What one version of the warehouse file says once and never changes (cached by its stamp)."""

    stamp: Stamp
    tables: frozenset[str]
    last_hour: datetime | None
    first_hour: datetime | None
    daily_first_day: date | None
    daily_last_day: date | None


class WarehouseReader:
    """Read-only queries of the warehouse; see the module docstring for the connection rules.

    ``use_daily`` False always reads the hourly mart (the tests compare both paths);
    ``hours_cache_size`` bounds the per-workload hours-with-data cache of the daily path."""

    def __init__(self, path: Path | str, *, use_daily: bool = True, hours_cache_size: int = 4096) -> None:
        self.path = str(path)
        self.use_daily = use_daily
        self.hours_cache_size = hours_cache_size
        self.reader = Reader(path)
        self._lock = threading.Lock()
        self._facts: _Facts | None = None
        self._index: dict[str, WorkloadRef] | None = None
        self._index_stamp: Stamp | None = None
        self._hours: OrderedDict[tuple[str, str, str, str], dict[date, int]] = OrderedDict()
        self._hours_stamp: Stamp | None = None
        # workload_cost_view answers of one version (the same bound as the hours cache)
        self._views: OrderedDict[Any, tuple[dict[str, Any], dict[str, Any]]] = OrderedDict()
        self._views_stamp: Stamp | None = None

    # ------------------------------------------------------------------ connection
    @property
    def connections_opened(self) -> int:
        return self.reader.connections_opened

    @contextmanager
    def connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only cursor on the live published version."""
        with self.reader.snapshot() as snap:
            yield snap.cursor

    @contextmanager
    def _cursor(self) -> Iterator[tuple[duckdb.DuckDBPyConnection, Stamp]]:
        """``connection`` and the stamp of the version the cursor reads."""
        with self.reader.snapshot() as snap:
            yield snap.cursor, snap.stamp

    def version(self) -> str | None:
        """The published build version the next request reads (the freshness stamp)."""
        return self.reader.version()

    def holds_connection(self) -> bool:
        return self.reader.holds_connection()

    def close(self) -> None:
        """Close the connection and forget every cached lookup."""
        with self._lock:
            self._facts = None
            self._index = self._index_stamp = None
            self._hours.clear()
            self._hours_stamp = None
            self._views.clear()
            self._views_stamp = None
        self.reader.close()

    def readable(self) -> bool:
        with self.connection() as con:
            con.execute("select 1").fetchone()
        return True

    def _facts_of(self, con: duckdb.DuckDBPyConnection, stamp: Stamp) -> _Facts:
        """The tables and hour/day bounds of the file version ``con`` reads (``stamp``)."""
        facts = self._facts
        if facts is not None and facts.stamp == stamp:
            return facts
        tables = frozenset(str(r[0]) for r in con.execute(
            "select table_name from information_schema.tables where table_schema = current_schema()"
        ).fetchall())
        first = last = None
        if "fct_gpu_allocation_hourly" in tables:
            row = con.execute("select min(hour), max(hour) from fct_gpu_allocation_hourly").fetchone()
            first, last = (_utc(row[0]), _utc(row[1])) if row else (None, None)
        d_first = d_last = None
        if "fct_workload_daily" in tables:
            row = con.execute("select min(day), max(day) from fct_workload_daily").fetchone()
            d_first, d_last = (_day(row[0]), _day(row[1])) if row else (None, None)
        facts = _Facts(stamp, tables, last, first, d_first, d_last)
        with self._lock:
            self._facts = facts
        return facts

    # ------------------------------------------------------------------ workloads and teams
    def workload_index(self) -> dict[str, WorkloadRef]:
        """Every discovered workload by id (cached until the warehouse file changes)."""
        index, stamp = self._index, self._index_stamp
        if index is not None and stamp == self.reader.stamp():
            return index
        with self._cursor() as (con, stamp):
            facts = self._facts_of(con, stamp)
            if "dim_workload" in facts.tables:
                rows = con.execute(
                    "select cluster, namespace, workload_kind, workload, team, tenant, tier from dim_workload"
                ).fetchall()
            else:
                rows = con.execute(
                    "select cluster, namespace, workload_kind, workload, any_value(team), any_value(tenant), "
                    "any_value(tier) from fct_gpu_allocation_hourly group by all"
                ).fetchall()
        index = {}
        for cluster, ns, kind, name, team, tenant, tier in rows:
            if not (cluster and ns and kind and name):
                continue
            wid = workload_id(cluster, ns, kind, name)
            index[wid] = WorkloadRef(wid, cluster, ns, kind, name, team, tenant, tier)
        with self._lock:
            self._index, self._index_stamp = index, facts.stamp
        return index

    def namespaces(self) -> list[tuple[str, str, str | None]]:
        """(cluster, namespace, team) of every namespace the warehouse knows, sorted."""
        with self._cursor() as (con, stamp):
            tables = self._facts_of(con, stamp).tables
            parts = []
            if "dim_workload" in tables:
                parts.append("select cluster, namespace, team from dim_workload")
            if "fct_showback_daily" in tables:
                parts.append("select cluster, namespace, team from fct_showback_daily "
                             f"where namespace not in {SYNTHETIC_LINES!r}")
            if not parts:
                return []
            rows = con.execute(
                f"select cluster, namespace, mode(team) from ({' union all '.join(parts)}) "
                "where cluster is not null and namespace is not null group by 1, 2 order by 1, 2"
            ).fetchall()
        return [(str(c), str(n), t) for c, n, t in rows]

    def clusters(self) -> list[str]:
        with self.connection() as con:
            rows = con.execute("select distinct cluster from fct_cluster_capacity_hourly order by 1").fetchall()
        return [str(r[0]) for r in rows]

    def last_hour(self) -> datetime | None:
        with self._cursor() as (con, stamp):
            return self._facts_of(con, stamp).last_hour

    # ------------------------------------------------------------------ product reads
    def workload_cost(self, cluster: str, namespace: str, kind: str, name: str,
                      window: timedelta) -> dict[str, Any]:
        """Cost of one workload over ``window`` ending at the warehouse's last hour.

        A window of whole days that ends at midnight UTC reads ``fct_workload_daily`` (a plain per-day sum
        of the hourly mart, so the same numbers) when that mart covers the hourly one's days; any other
        window reads ``fct_gpu_allocation_hourly``."""
        with self._cursor() as (con, stamp):
            return self._workload_cost(con, stamp, (cluster, namespace, kind, name), window)

    def workload_cost_view(self, cluster: str, namespace: str, kind: str, name: str,
                           window: timedelta) -> tuple[Stamp, dict[str, Any], dict[str, Any]]:
        """(stamp, ``workload_cost``, serving unit cost over the same days) read in one snapshot, so
        both halves and the stamp are of one published version; kept per version in a bounded LRU (the
        dicts are shared: callers must not change them)."""
        from exports.unit_cost import workload_unit_cost

        key = (cluster, namespace, kind, name)
        ckey = (key, window)
        now = self.reader.stamp()
        with self._lock:
            if self._views_stamp == now and ckey in self._views:
                self._views.move_to_end(ckey)
                return now, *self._views[ckey]
        with self._cursor() as (con, stamp):
            cost = self._workload_cost(con, stamp, key, window)
            if cost.get("window_start") is None:
                serving = empty_unit_cost()
            else:
                start = datetime.fromisoformat(cost["window_start"]).date()
                end = (datetime.fromisoformat(cost["window_end"]) - timedelta(microseconds=1)).date() \
                    + timedelta(days=1)
                serving = workload_unit_cost(con, key, start, end)
        with self._lock:
            if self._views_stamp != stamp:
                self._views.clear()
                self._views_stamp = stamp
            self._views[ckey] = (cost, serving)
            while len(self._views) > self.hours_cache_size:
                self._views.popitem(last=False)
        return stamp, cost, serving

    def _workload_cost(self, con: duckdb.DuckDBPyConnection, stamp: Stamp, key: tuple[str, str, str, str],
                       window: timedelta) -> dict[str, Any]:
        facts = self._facts_of(con, stamp)
        if facts.last_hour is None:
            return {"cost_usd": 0.0, "idle_pct": None, "gpu_hours": 0.0, "window_start": None,
                    "window_end": None, "warehouse_version": _version(stamp)}
        end = facts.last_hour + timedelta(hours=1)
        start = end - window
        sums = ("coalesce(sum(total_cost_usd), 0), coalesce(sum(gpu_hours), 0), "
                "coalesce(sum(idle_gpu_hours), 0), coalesce(sum(utilized_gpu_hours), 0), "
                "coalesce(sum(idle_cost_usd), 0), coalesce(sum(gpu_cost_usd), 0), "
                "coalesce(sum(measured_gpu_hours), 0), coalesce(sum(unmeasured_gpu_hours), 0), "
                f"{idle_pct_sql()}")
        where = "cluster = ? and namespace = ? and workload_kind = ? and workload = ?"
        if self._daily_covers(facts, start, end):
            row = con.execute(
                f"select {sums} from fct_workload_daily where {where} and day >= ? and day < ?",
                [*key, start.date(), end.date()],
            ).fetchone()
            by_day = self._hours_by_day(con, facts.stamp, key)
            hours = sum(n for d, n in by_day.items() if start.date() <= d < end.date())
        else:
            row = con.execute(
                f"select {sums}, count(distinct hour) from fct_gpu_allocation_hourly where {where} "
                "and hour >= ? and hour < ?",
                [*key, start, end],
            ).fetchone()
            assert row is not None
            row, hours = row[:9], row[9]
        assert row is not None
        cost, gpu_h, idle_h, used_h, idle_cost, gpu_cost, measured_h, unmeasured_h, idle_pct = row
        return {
            "cost_usd": round(float(cost), 2),
            # idle GPU-hours over MEASURED GPU-hours (the warehouse's idle_pct); unmeasured hours are
            # reported, never counted as idle
            "idle_pct": round(float(idle_pct), 4) if idle_pct is not None else None,
            "gpu_hours": round(float(gpu_h), 3),
            "measured_gpu_hours": round(float(measured_h), 3),
            "unmeasured_gpu_hours": round(float(unmeasured_h), 3),
            "idle_gpu_hours": round(float(idle_h), 3),
            "utilized_gpu_hours": round(float(used_h), 3),
            "gpu_cost_usd": round(float(gpu_cost), 2),
            "idle_cost_usd": round(float(idle_cost), 2),
            "hours_with_data": int(hours),
            "window_start": start.isoformat(),
            "window_end": end.isoformat(),
            "warehouse_version": _version(stamp),
        }

    def cost_source(self, window: timedelta) -> str | None:
        """The mart ``workload_cost`` reads for ``window`` (None when the warehouse has no hours)."""
        with self._cursor() as (con, stamp):
            facts = self._facts_of(con, stamp)
        if facts.last_hour is None:
            return None
        end = facts.last_hour + timedelta(hours=1)
        return "fct_workload_daily" if self._daily_covers(facts, end - window, end) else "fct_gpu_allocation_hourly"

    def _daily_covers(self, facts: _Facts, start: datetime, end: datetime) -> bool:
        """Whether [start, end) is whole UTC days that ``fct_workload_daily`` holds exactly as the hourly mart."""
        if not self.use_daily or facts.daily_last_day is None or facts.daily_first_day is None:
            return False
        if (start.hour, start.minute, start.second, start.microsecond) != (0, 0, 0, 0):
            return False
        if (end.hour, end.minute, end.second, end.microsecond) != (0, 0, 0, 0):
            return False
        assert facts.last_hour is not None and facts.first_hour is not None
        # the daily mart was built from the same hourly rows: same first and last day
        return (facts.daily_last_day == facts.last_hour.date()
                and facts.daily_first_day == facts.first_hour.date())

    def _hours_by_day(self, con: duckdb.DuckDBPyConnection, stamp: Stamp,
                      key: tuple[str, str, str, str]) -> dict[date, int]:
        """Distinct hours with data per UTC day of one workload (the daily mart does not keep them);
        read once per workload and file version, kept in a bounded LRU."""
        with self._lock:
            if self._hours_stamp != stamp:
                self._hours.clear()
                self._hours_stamp = stamp
            found = self._hours.get(key)
            if found is not None:
                self._hours.move_to_end(key)
                return found
        rows = con.execute(
            "select cast(hour as date), count(distinct hour) from fct_gpu_allocation_hourly where cluster = ? "
            "and namespace = ? and workload_kind = ? and workload = ? group by 1",
            list(key),
        ).fetchall()
        by_day = {day: int(n) for d, n in rows if (day := _day(d)) is not None}
        with self._lock:
            if self._hours_stamp == stamp:
                self._hours[key] = by_day
                while len(self._hours) > self.hours_cache_size:
                    self._hours.popitem(last=False)
        return by_day

    def capacity_latest(self, cluster: str) -> dict[str, Any] | None:
        with self.connection() as cur:
            row = cur.execute(
                "select hour, gpu_capacity, gpu_allocated, gpu_unallocated, fragmentation_gpus, fragmentation_rate, "
                "nodes_in_use, nodes_lower_bound from fct_cluster_capacity_hourly where cluster = ? "
                "order by hour desc limit 1",
                [cluster],
            ).fetchone()
        if row is None:
            return None
        hour, cap, alloc, unalloc, frag_gpus, frag_rate, in_use, lower = row
        return {
            "hour": _utc(hour).isoformat() if hour is not None else None,  # type: ignore[union-attr]
            "gpu_capacity": float(cap or 0),
            "gpu_allocated": float(alloc or 0),
            "gpu_unallocated": float(unalloc or 0),
            "fragmentation_gpus": float(frag_gpus or 0),
            "fragmentation": round(float(frag_rate), 4) if frag_rate is not None else None,
            "nodes_in_use": int(in_use) if in_use is not None else None,
            "nodes_lower_bound": int(lower) if lower is not None else None,
        }

    def showback_view(self, first: date | None, last: date | None, group_by: str, teams: Sequence[str] | None,
                      *, default_days: int = 30, max_days: int = 400) -> tuple[Stamp, date, date, list[dict[str, Any]]]:
        """(stamp, first day, last day, ``showback`` lines) in one snapshot. ``last`` defaults to the
        warehouse's last day with hours (today when it has none), ``first`` to ``default_days`` before it."""
        with self._cursor() as (con, stamp):
            if last is None:
                last_hour = self._facts_of(con, stamp).last_hour
                last = last_hour.date() if last_hour is not None else date.today()
            if first is None:
                first = last - timedelta(days=default_days - 1)
            if first > last:
                raise BadRequest(f"from {first} is after to {last}")
            if (last - first).days + 1 > max_days:
                raise BadRequest(f"from {first} to {last} spans more than {max_days} days")
            start = datetime.combine(first, datetime.min.time())
            end = datetime.combine(last + timedelta(days=1), datetime.min.time())
            return stamp, first, last, self.showback(start, end, group_by, teams, cur=con)

    def showback(self, start: datetime, end: datetime, group_by: str,
                 teams: Sequence[str] | None, *, cur: duckdb.DuckDBPyConnection | None = None) -> list[dict[str, Any]]:
        """Showback lines per ``group_by`` (tenant | team | namespace) over [start, end) days.

        ``teams`` None = every line, including the synthetic (unallocated)/(overhead) ones. ``cur``: read
        on that cursor (one snapshot) instead of a new one."""
        cols = {"tenant": ["tenant"], "team": ["tenant", "team"], "namespace": ["cluster", "tenant", "team", "namespace"]}
        if group_by not in cols:
            raise BadRequest(f"group_by {group_by!r} must be tenant, team or namespace")
        keys = ", ".join(cols[group_by])
        where = "day >= ? and day < ?"
        params: list[Any] = [start.date(), end.date()]
        if teams is not None:
            if not teams:
                return []
            where += f" and team in ({', '.join('?' for _ in teams)})"
            params += list(teams)
        if cur is None:
            with self.connection() as own:
                return self.showback(start, end, group_by, teams, cur=own)
        rows = cur.execute(
            f"select {keys}, sum(gpu_hours), sum(idle_gpu_hours), sum(direct_cost_usd), sum(idle_cost_usd), "
            f"sum(shared_cost_usd), sum(chargeback_usd) from fct_showback_daily where {where} "
            f"group by {keys} order by sum(chargeback_usd) desc, {keys}",
            params,
        ).fetchall()
        out = []
        n = len(cols[group_by])
        for r in rows:
            line: dict[str, Any] = dict(zip(cols[group_by], r[:n], strict=True))
            gpu_h, idle_h, direct, idle_cost, shared, charge = (float(v or 0) for v in r[n:])
            line.update(gpu_hours=round(gpu_h, 3), idle_gpu_hours=round(idle_h, 3),
                        direct_cost_usd=round(direct, 2), idle_cost_usd=round(idle_cost, 2),
                        shared_cost_usd=round(shared, 2), chargeback_usd=round(charge, 2))
            out.append(line)
        return out
