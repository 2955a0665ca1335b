"""The API's reads of the warehouse marts (read-only DuckDB), scoped by the caller's teams.

One shared read-only connection per app, a fresh cursor per request (safe across the threadpool).
DuckDB lets one process write or many read, so the connection is closed after ``idle_close_s`` without
a query (``gpufinops build`` can then write) and reopened, also when the file was replaced. Every
filter value travels as a bound parameter, never inside the SQL text.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb

from gpufinops.appdb.ids import workload_id
from gpufinops.errors import BadRequest, ConfigError
from gpufinops.warehouse import connect

__all__ = ["WarehouseReader", "WorkloadRef", "parse_window", "MAX_WINDOW"]

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


def _utc(value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return datetime.fromisoformat(str(value)).astimezone(UTC)


class WarehouseReader:
    def __init__(self, path: Path | str, *, idle_close_s: float = 30.0) -> None:
        self.path = str(path)
        self.idle_close_s = idle_close_s
        self._lock = threading.Lock()
        self._con: duckdb.DuckDBPyConnection | None = None
        self._stamp: tuple[int, int] | None = None
        self._users = 0
        self._last_used = time.monotonic()
        self._index: dict[str, WorkloadRef] | None = None
        self._index_stamp: tuple[int, int] | None = None
        self._closed = threading.Event()
        threading.Thread(target=self._idle_loop, name="api-warehouse-idle-close", daemon=True).start()

    # ------------------------------------------------------------------ connection
    def _file_stamp(self) -> tuple[int, int]:
        try:
            st = os.stat(self.path)
        except FileNotFoundError as exc:
            raise ConfigError(f"warehouse {self.path} does not exist yet; run `gpufinops build` first") from exc
        return (st.st_ino, st.st_mtime_ns)

    @contextmanager
    def cursor(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._lock:
            stamp = self._file_stamp()
            if self._con is not None and stamp != self._stamp and self._users == 0:
                self._con.close()
                self._con = None
            if self._con is None:
                self._con = connect(self.path, read_only=True)
                self._con.execute("set TimeZone = 'UTC'")
                self._stamp = stamp
            self._users += 1
            cur = self._con.cursor()
        try:
            cur.execute("set TimeZone = 'UTC'")
            yield cur
        finally:
            cur.close()
            with self._lock:
                self._users -= 1
                self._last_used = time.monotonic()

    def _idle_loop(self) -> None:
        while not self._closed.wait(min(5.0, self.idle_close_s)):
            with self._lock:
                if (self._con is not None and self._users == 0
                        and time.monotonic() - self._last_used >= self.idle_close_s):
                    self._con.close()
                    self._con = None

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None

    def readable(self) -> bool:
        with self.cursor() as cur:
            cur.execute("select 1").fetchone()
        return True

    @staticmethod
    def _has_table(cur: duckdb.DuckDBPyConnection, name: str) -> bool:
        row = cur.execute(
            "select count(*) from information_schema.tables where table_name = ?", [name]
        ).fetchone()
        return bool(row and row[0])

    # ------------------------------------------------------------------ workloads and teams
    def workload_index(self) -> dict[str, WorkloadRef]:
        """Every discovered workload by id (cached until the warehouse file changes)."""
        stamp = self._file_stamp()
        if self._index is not None and self._index_stamp == stamp:
            return self._index
        with self.cursor() as cur:
            if self._has_table(cur, "dim_workload"):
                rows = cur.execute(
                    "select cluster, namespace, workload_kind, workload, team, tenant, tier from dim_workload"
                ).fetchall()
            else:
                rows = cur.execute(
                    "select cluster, namespace, workload_kind, workload, any_value(team), any_value(tenant), "
                    "any_value(tier) from fct_gpu_allocation_hourly group by all"
                ).fetchall()
        index = {}
        for cluster, ns, kind, name, team, tenant, tier in rows:
            if not (cluster and ns and kind and name):
                continue
            wid = workload_id(cluster, ns, kind, name)
            index[wid] = WorkloadRef(wid, cluster, ns, kind, name, team, tenant, tier)
        self._index, self._index_stamp = index, stamp
        return index

    def namespaces(self) -> list[tuple[str, str, str | None]]:
        """(cluster, namespace, team) of every namespace the warehouse knows, sorted."""
        with self.cursor() as cur:
            parts = []
            if self._has_table(cur, "dim_workload"):
                parts.append("select cluster, namespace, team from dim_workload")
            if self._has_table(cur, "fct_showback_daily"):
                parts.append("select cluster, namespace, team from fct_showback_daily "
                             "where namespace not in ('(unallocated)', '(overhead)')")
            if not parts:
                return []
            rows = cur.execute(
                f"select cluster, namespace, mode(team) from ({' union all '.join(parts)}) "
                "where cluster is not null and namespace is not null group by 1, 2 order by 1, 2"
            ).fetchall()
        return [(str(c), str(n), t) for c, n, t in rows]

    def clusters(self) -> list[str]:
        with self.cursor() as cur:
            rows = cur.execute("select distinct cluster from fct_cluster_capacity_hourly order by 1").fetchall()
        return [str(r[0]) for r in rows]

    def last_hour(self) -> datetime | None:
        with self.cursor() as cur:
            row = cur.execute("select max(hour) from fct_gpu_allocation_hourly").fetchone()
        return _utc(row[0]) if row else None

    # ------------------------------------------------------------------ product reads
    def workload_cost(self, cluster: str, namespace: str, kind: str, name: str,
                      window: timedelta) -> dict[str, Any]:
        """Cost of one workload over ``window`` ending at the warehouse's last hour."""
        with self.cursor() as cur:
            last = cur.execute("select max(hour) from fct_gpu_allocation_hourly").fetchone()
            last_hour = _utc(last[0]) if last else None
            if last_hour is None:
                return {"cost_usd": 0.0, "idle_pct": None, "gpu_hours": 0.0, "window_start": None,
                        "window_end": None}
            end = last_hour + timedelta(hours=1)
            start = end - window
            row = cur.execute(
                "select coalesce(sum(total_cost_usd), 0), coalesce(sum(gpu_hours), 0), "
                "coalesce(sum(idle_gpu_hours), 0), coalesce(sum(utilized_gpu_hours), 0), "
                "coalesce(sum(idle_cost_usd), 0), coalesce(sum(gpu_cost_usd), 0), count(distinct hour) "
                "from fct_gpu_allocation_hourly where cluster = ? and namespace = ? and workload_kind = ? "
                "and workload = ? and hour >= ? and hour < ?",
                [cluster, namespace, kind, name, start, end],
            ).fetchone()
        assert row is not None
        cost, gpu_h, idle_h, used_h, idle_cost, gpu_cost, hours = row
        return {
            "cost_usd": round(float(cost), 2),
            "idle_pct": round(float(idle_h) / float(gpu_h), 4) if gpu_h else None,
            "gpu_hours": round(float(gpu_h), 3),
            "idle_gpu_hours": round(float(idle_h), 3),
            "utilized_gpu_hours": round(float(used_h), 3),
            "gpu_cost_usd": round(float(gpu_cost), 2),
            "idle_cost_usd": round(float(idle_cost), 2),
            "hours_with_data": int(hours),
            "window_start": start.isoformat(),
            "window_end": end.isoformat(),
        }

    def capacity_latest(self, cluster: str) -> dict[str, Any] | None:
        with self.cursor() as cur:
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

    def showback(self, start: datetime, end: datetime, group_by: str,
                 teams: Sequence[str] | None) -> list[dict[str, Any]]:
        """Showback lines per ``group_by`` (tenant | team | namespace) over [start, end) days.

        ``teams`` None = every line, including the synthetic (unallocated)/(overhead) ones."""
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
        with self.cursor() as cur:
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
