"""Every SQL the dashboards and reports run, with the viewer's scope applied here, in the query layer.

Each query is a plain function ``fn(cursor, scope, ...) -> DataFrame``, registered in ``RAW`` by name.
The dashboards call them behind Streamlit's cache (``dashboards.queries``), the reports and the bench
directly, each on a cursor of ``gpufinops.warehouse.Reader``. They select and sum mart columns; a
ratio of sums goes through the warehouse's SQL macros (``idle_pct``), never a formula written here.

Scoping: a ``Scope`` with ``teams`` set filters every team-level query to those teams, and fleet-level
queries (nodes, clusters, the bill) refuse it with ``AccessDenied``. Pages cannot widen it: they only
ever pass ``Scope.narrow(...)`` of the identity's scope.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date, datetime, time
from typing import Any, TypeVar

import duckdb
import pandas as pd

from gpufinops.views.names import SYNTHETIC_LINES, idle_pct_sql
from gpufinops.views.scope import Scope

__all__ = [
    "RAW",
    "SYNTHETIC_LINES",
    "SPARKLINE_DAILY_FROM_DAYS",
    "recommendations_raw",
    "change_outcome",
    "OUTCOME_COLUMNS",
]

F = TypeVar("F", bound=Callable[..., pd.DataFrame])
RAW: dict[str, Callable[..., pd.DataFrame]] = {}


def _query(fn: F) -> F:
    RAW[fn.__name__] = fn
    return fn


# ---------------------------------------------------------------- helpers


def _bounds(start: date, end: date) -> tuple[datetime, datetime]:
    """[start, end) days as naive UTC datetimes for hour columns."""
    return datetime.combine(start, time()), datetime.combine(end, time())


def _team_filter(scope: Scope, column: str = "team") -> tuple[str, list[Any]]:
    """The scope as a SQL predicate: nothing for everyone, ``team in (?, ...)`` otherwise (an empty scope
    matches no row). Plain comparisons let DuckDB skip row groups; list_contains would not."""
    if scope.teams is None:
        return "", []
    if not scope.teams:
        return " and false", []
    return f" and {column} in ({', '.join('?' * len(scope.teams))})", list(scope.teams)


def _team_filter_named(scope: Scope, column: str = "team") -> tuple[str, dict[str, Any]]:
    """``_team_filter`` with named parameters ($team_0, ...) for queries written with names."""
    if scope.teams is None:
        return "", {}
    if not scope.teams:
        return " and false", {}
    names = {f"team_{i}": t for i, t in enumerate(scope.teams)}
    return f" and {column} in ({', '.join('$' + n for n in names)})", names


def _df(cur: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] | dict[str, Any]) -> pd.DataFrame:
    df = cur.execute(sql, params if isinstance(params, dict) else list(params)).df()
    if "day" in df.columns and pd.api.types.is_datetime64_any_dtype(df["day"]):
        df["day"] = df["day"].dt.date  # DuckDB dates arrive as midnight timestamps
    return df


# ---------------------------------------------------------------- window and teams


@_query
def data_window(cur: duckdb.DuckDBPyConnection, scope: Scope) -> pd.DataFrame:
    """First and last day with showback rows the viewer may see (one row: first_day, last_day)."""
    where, params = _team_filter(scope)
    return _df(cur, f"select min(day) as first_day, max(day) as last_day from fct_showback_daily where true{where}", params)


@_query
def budget_run_rates(cur: duckdb.DuckDBPyConnection, scope: Scope, as_of: date | None) -> pd.DataFrame:
    """fct_budget_run_rate_daily on ``as_of`` (default: its last day): spend, month to date, run rate and
    month-end forecast per team and workload the viewer may see, and the fleet for fleet viewers."""
    where, params = _team_filter(scope)
    fleet = " or scope_kind = 'fleet'" if scope.fleet else ""
    day = "?" if as_of is not None else "(select max(day) from fct_budget_run_rate_daily)"
    return _df(
        cur,
        f"""
        select day, scope_kind, scope_id, team, workload_cluster as cluster, namespace, workload_kind, workload,
               spend_usd, month_to_date_usd, run_rate_days, run_rate_usd_day, days_left, days_in_month,
               forecast_month_end_usd
        from fct_budget_run_rate_daily
        where day = {day} and ((scope_kind <> 'fleet'{where}){fleet})
        order by scope_kind, scope_id
        """,
        ([as_of] if as_of is not None else []) + params,
    )


@_query
def teams(cur: duckdb.DuckDBPyConnection, scope: Scope) -> pd.DataFrame:
    """Tenants and teams the viewer may see, from the showback mart."""
    where, params = _team_filter(scope)
    return _df(
        cur,
        f"select distinct tenant, team from fct_showback_daily where not list_contains(?, namespace){where} "
        "order by tenant, team",
        [list(SYNTHETIC_LINES), *params],
    )


@_query
def team_namespaces(cur: duckdb.DuckDBPyConnection, scope: Scope) -> pd.DataFrame:
    """(cluster, namespace, team) pairs the viewer may see; recommendations are scoped through it."""
    where, params = _team_filter(scope)
    return _df(
        cur,
        f"select distinct cluster, namespace, team from fct_showback_daily where not list_contains(?, namespace){where} "
        "order by 1, 2",
        [list(SYNTHETIC_LINES), *params],
    )


# ---------------------------------------------------------------- finance


@_query
def spend_by_team_daily(
    cur: duckdb.DuckDBPyConnection, scope: Scope, start: date, end: date, shared_namespaces: tuple[str, ...]
) -> pd.DataFrame:
    """Chargeback per day, tenant and team, with its parts (DESIGN §3: chargeback = direct + shares).

    Only the teams' own namespaces: the shared namespaces and the mart's ``(unallocated)`` /
    ``(overhead)`` lines are what ``cost_lines_daily`` shows as their own lines.
    """
    where, params = _team_filter(scope)
    return _df(
        cur,
        f"""
        select day, tenant, team,
               sum(gpu_hours)::double as gpu_hours,
               sum(idle_gpu_hours)::double as idle_gpu_hours,
               sum(direct_cost_usd)::double as direct_cost_usd,
               sum(idle_cost_usd)::double as idle_cost_usd,
               sum(shared_cost_usd)::double as shared_cost_usd,
               sum(unallocated_share_usd)::double as unallocated_share_usd,
               sum(chargeback_usd)::double as chargeback_usd
        from fct_showback_daily
        where day >= ? and day < ? and not list_contains(?, namespace) and not list_contains(?, namespace){where}
        group by all order by day, tenant, team
        """,
        [start, end, list(SYNTHETIC_LINES), list(shared_namespaces), *params],
    )


@_query
def cost_lines_daily(
    cur: duckdb.DuckDBPyConnection, scope: Scope, start: date, end: date, shared_namespaces: tuple[str, ...]
) -> pd.DataFrame:
    """The day's total cost as lines that add up: GPU, CPU/memory, shared, unallocated.

    GPU and CPU/memory are the pods' direct cost outside the shared namespaces; shared is the shared
    namespaces' cost plus the fixed overhead; unallocated is the nodes' cost no pod holds, net of
    overcommit. ``total_usd`` is Σ chargeback over every showback line (= node cost + overhead), and
    ``charged_to_teams_usd`` the part that lands on the teams' own namespaces.
    """
    scope.require_fleet()
    lo, hi = _bounds(start, end)
    # the pods' part from the daily per-workload mart (~24x fewer rows than the hourly one, the same
    # sums); the nodes' per hour first: casting every row's timestamp to a date is the expensive part
    return _df(
        cur,
        """
        with pods as (
            select day,
                   sum(gpu_cost_usd) filter (where not is_shared_namespace)::double as gpu_usd,
                   sum(cpu_cost_usd + memory_cost_usd) filter (where not is_shared_namespace)::double
                       as cpu_memory_usd,
                   sum(idle_cost_usd)::double as idle_usd
            from fct_workload_daily
            where day >= $start and day < $end
            group by day
        ),
        lines as (
            select day,
                   sum(direct_cost_usd) filter (where namespace = '(overhead)' or list_contains($shared, namespace))::double
                       as shared_usd,
                   sum(direct_cost_usd) filter (where namespace = '(unallocated)')::double as unallocated_usd,
                   sum(chargeback_usd)::double as total_usd,
                   sum(chargeback_usd) filter (where not list_contains($synthetic, namespace)
                                                 and not list_contains($shared, namespace))::double as charged_usd
            from fct_showback_daily where day >= $start and day < $end
            group by all
        ),
        nodes_hourly as (
            select hour, sum(node_cost_usd) as node_cost_usd
            from fct_node_hourly where hour >= $lo and hour < $hi
            group by hour
        ),
        nodes as (select hour::date as day, sum(node_cost_usd)::double as node_cost_usd from nodes_hourly group by all),
        days as (select day from pods union select day from lines union select day from nodes)
        select d.day,
               coalesce(gpu_usd, 0) as gpu_usd,
               coalesce(cpu_memory_usd, 0) as cpu_memory_usd,
               coalesce(shared_usd, 0) as shared_usd,
               coalesce(unallocated_usd, 0) as unallocated_usd,
               coalesce(total_usd, 0) as total_usd,
               coalesce(charged_usd, 0) as charged_to_teams_usd,
               coalesce(idle_usd, 0) as idle_usd,
               coalesce(node_cost_usd, 0) as node_cost_usd
        from days d left join pods using (day) left join lines using (day) left join nodes using (day)
        order by d.day
        """,
        {"lo": lo, "hi": hi, "start": start, "end": end, "shared": list(shared_namespaces),
         "synthetic": list(SYNTHETIC_LINES)},
    )


@_query
def bill_reconciliation(cur: duckdb.DuckDBPyConnection, scope: Scope, start: date, end: date) -> pd.DataFrame:
    """Reconciliation rows in the window (none when no FOCUS bill is loaded)."""
    scope.require_fleet()
    return _df(
        cur,
        """
        select day, provider, resource_id, status,
               computed_cost_usd::double as computed_cost_usd, billed_cost_usd::double as billed_cost_usd,
               effective_cost_usd::double as effective_cost_usd, difference_usd::double as difference_usd
        from fct_bill_reconciliation_daily where day >= ? and day < ?
        order by day, abs(difference_usd) desc
        """,
        [start, end],
    )


# ---------------------------------------------------------------- team lead


@_query
def team_totals(cur: duckdb.DuckDBPyConnection, scope: Scope, start: date, end: date) -> pd.DataFrame:
    """One row per team: GPU-hours, measured hours, idle % over measured hours, cost.

    GPU-hours come from the daily per-workload mart (``fct_workload_daily``, the hourly mart summed per
    UTC day): a window is whole days, so the sums are the hourly mart's at a fraction of the rows.
    """
    where, params = _team_filter(scope)
    return _df(
        cur,
        f"""
        with alloc as (
            select team, sum(gpu_hours)::double as gpu_hours,
                   sum(measured_gpu_hours)::double as measured_gpu_hours,
                   sum(idle_gpu_hours)::double as idle_gpu_hours,
                   sum(utilized_gpu_hours)::double as utilized_gpu_hours,
                   sum(idle_cost_usd)::double as idle_cost_usd
            from fct_workload_daily where day >= ? and day < ?{where}
            group by all
        ),
        showback as (
            select team, sum(chargeback_usd)::double as chargeback_usd, sum(direct_cost_usd)::double as direct_cost_usd
            from fct_showback_daily where day >= ? and day < ? and not list_contains(?, namespace){where}
            group by all
        )
        select team, coalesce(gpu_hours, 0) as gpu_hours, coalesce(measured_gpu_hours, 0) as measured_gpu_hours,
               coalesce(utilized_gpu_hours, 0) as utilized_gpu_hours,
               -- DESIGN §3: idle % over measured hours only; unmeasured hours are shown, not guessed
               {idle_pct_sql("idle_gpu_hours", "measured_gpu_hours")} as idle_pct,
               coalesce(idle_cost_usd, 0) as idle_cost_usd,
               coalesce(direct_cost_usd, 0) as direct_cost_usd,
               coalesce(chargeback_usd, 0) as chargeback_usd
        from alloc full join showback using (team)
        order by chargeback_usd desc
        """,
        [start, end, *params, start, end, list(SYNTHETIC_LINES), *params],
    )


@_query
def team_daily(cur: duckdb.DuckDBPyConnection, scope: Scope, start: date, end: date) -> pd.DataFrame:
    """Per day and namespace: GPU-hours, idle GPU-hours and chargeback."""
    where, params = _team_filter(scope)
    return _df(
        cur,
        f"""
        select day, team, namespace, sum(gpu_hours)::double as gpu_hours,
               sum(idle_gpu_hours)::double as idle_gpu_hours, sum(chargeback_usd)::double as chargeback_usd
        from fct_showback_daily where day >= ? and day < ? and not list_contains(?, namespace){where}
        group by all order by day, team, namespace
        """,
        [start, end, list(SYNTHETIC_LINES), *params],
    )


# windows this long or longer get one sparkline point per day (from the daily mart); shorter ones
# about 48 points from the hourly mart, whose scan is cheap over a few days
SPARKLINE_DAILY_FROM_DAYS = 7


@_query
def idle_workloads(
    cur: duckdb.DuckDBPyConnection, scope: Scope, start: date, end: date, limit: int = 10
) -> pd.DataFrame:
    """The workloads with the most idle-allocated GPU cost, with a utilisation series for a sparkline.

    Totals come from ``fct_workload_daily`` (GPU rows only: ``gpu_hours > 0``, as CPU-only pods keep
    rows of their own there). The sparkline has one point per day for windows of
    ``SPARKLINE_DAILY_FROM_DAYS`` or more, else ~48 points of whole hours from the hourly mart.
    """
    where, params = _team_filter_named(scope)
    where_s = where.replace(" team in", " s.team in")
    days = (end - start).days
    if days >= SPARKLINE_DAILY_FROM_DAYS:
        series_sql = f"""
            select s.cluster, s.namespace, s.workload_kind, s.workload, s.day as bucket,
                   sum(s.utilized_gpu_hours) / nullif(sum(s.measured_gpu_hours), 0) as util
            from fct_workload_daily s
            semi join totals t on s.cluster = t.cluster and s.namespace = t.namespace
                 and s.workload_kind = t.workload_kind and s.workload = t.workload
            where s.day >= $start and s.day < $end and s.gpu_hours > 0{where_s}
            group by all"""
        extra: dict[str, Any] = {}
    else:
        lo, hi = _bounds(start, end)
        series_sql = f"""
            -- integer buckets: time_bucket on a timestamptz goes through the time-zone library per row
            select s.cluster, s.namespace, s.workload_kind, s.workload, epoch(s.hour)::bigint // ($bucket * 3600) as bucket,
                   sum(s.utilized_gpu_hours) / nullif(sum(s.measured_gpu_hours), 0) as util
            from fct_gpu_allocation_hourly s
            semi join totals t on s.cluster = t.cluster and s.namespace = t.namespace
                 and s.workload_kind = t.workload_kind and s.workload = t.workload
            where s.hour >= $lo and s.hour < $hi and s.gpu_hours > 0{where_s}
            group by all"""
        # ~48 points per sparkline whatever the window
        extra = {"lo": lo, "hi": hi, "bucket": max(1, days * 24 // 48)}
    # totals per workload first (few groups); the sparkline series only for the top ones
    return _df(
        cur,
        f"""
        with totals as (
            select cluster, namespace, team, workload_kind, workload, any_value(tier) as tier,
                   sum(gpu_hours)::double as gpu_hours, sum(measured_gpu_hours)::double as measured_gpu_hours,
                   sum(utilized_gpu_hours)::double as utilized_gpu_hours,
                   sum(idle_gpu_hours)::double as idle_gpu_hours, sum(idle_cost_usd)::double as idle_cost_usd,
                   sum(total_cost_usd)::double as cost_usd
            from fct_workload_daily
            where day >= $start and day < $end and gpu_hours > 0{where}
            group by cluster, namespace, team, workload_kind, workload
            order by idle_cost_usd desc, workload limit $limit
        ),
        series as ({series_sql}
        ),
        spark as (
            select cluster, namespace, workload_kind, workload,
                   list(round(coalesce(util, 0) * 100, 1)::double order by bucket) as utilisation_pct
            from series group by all
        )
        select t.*, {idle_pct_sql("idle_gpu_hours", "measured_gpu_hours")} as idle_pct,
               s.utilisation_pct
        from totals t left join spark s using (cluster, namespace, workload_kind, workload)
        order by idle_cost_usd desc, workload
        """,
        {"start": start, "end": end, "limit": limit, **extra, **params},
    )


# ---------------------------------------------------------------- platform


@_query
def capacity_hourly(cur: duckdb.DuckDBPyConnection, scope: Scope, start: date, end: date) -> pd.DataFrame:
    """Per hour and cluster: GPU capacity, allocated, utilised, fragmentation, nodes vs lower bound."""
    scope.require_fleet()
    lo, hi = _bounds(start, end)
    return _df(
        cur,
        """
        with used as (
            select hour, cluster, sum(utilized_gpu_hours)::double as gpu_utilized
            from fct_node_hourly where hour >= ? and hour < ? group by all
        )
        select c.hour::timestamp as hour, c.cluster, c.gpu_capacity::double as gpu_capacity,
               c.gpu_allocated::double as gpu_allocated, coalesce(u.gpu_utilized, 0) as gpu_utilized,
               c.gpu_unallocated::double as gpu_unallocated, c.fragmentation_gpus::double as fragmentation_gpus,
               c.fragmentation_rate::double as fragmentation_rate, c.nodes_in_use, c.nodes_lower_bound,
               case when c.nodes_in_use > 0 then c.nodes_lower_bound / c.nodes_in_use end as binpack_efficiency
        from fct_cluster_capacity_hourly c left join used u using (hour, cluster)
        where c.hour >= ? and c.hour < ?
        order by c.hour, c.cluster
        """,
        [lo, hi, lo, hi],
    )


@_query
def node_allocation(cur: duckdb.DuckDBPyConnection, scope: Scope, cluster: str | None = None) -> pd.DataFrame:
    """Each GPU node at the latest hour: capacity, allocated and utilised GPUs (for the heatmap)."""
    scope.require_fleet()
    return _df(
        cur,
        """
        with latest as (select cluster, max(hour) as hour from fct_node_hourly group by cluster)
        select n.hour::timestamp as hour, n.cluster, n.node, n.node_pool, n.gpu_model,
               n.gpu_capacity::double as gpu_capacity,
               n.allocated_gpu_hours::double as gpu_allocated, n.utilized_gpu_hours::double as gpu_utilized,
               n.unallocated_gpu_hours::double as gpu_free, n.node_cost_usd::double as node_cost_usd
        from fct_node_hourly n join latest l using (cluster, hour)
        where n.gpu_capacity > 0 and (? is null or n.cluster = ?)
        order by n.cluster, n.node_pool, n.node
        """,
        [cluster, cluster],
    )


@_query
def stranded_gpus(cur: duckdb.DuckDBPyConnection, scope: Scope) -> pd.DataFrame:
    """Latest hour per cluster: free GPUs, and those stranded by fragmentation (DESIGN §3, Weng et al.)."""
    scope.require_fleet()
    return _df(
        cur,
        """
        with latest as (select cluster, max(hour) as hour from fct_cluster_capacity_hourly group by cluster)
        select c.cluster, c.hour::timestamp as hour, c.gpu_capacity::double as gpu_capacity,
               c.gpu_unallocated::double as gpu_free, c.fragmentation_gpus::double as stranded_gpus,
               c.fragmentation_rate::double as fragmentation_rate
        from fct_cluster_capacity_hourly c join latest using (cluster, hour)
        order by c.cluster
        """,
        [],
    )


@_query
def pending_gpu_pods(cur: duckdb.DuckDBPyConnection, scope: Scope, start: date, end: date) -> pd.DataFrame:
    """GPU pods waiting for a node, per hour and cluster (``fct_cluster_capacity_hourly.pending_gpu_pods``)."""
    scope.require_fleet()
    lo, hi = _bounds(start, end)
    return _df(
        cur,
        """
        select hour::timestamp as hour, cluster, pending_gpu_pods
        from fct_cluster_capacity_hourly where hour >= ? and hour < ?
        order by hour, cluster
        """,
        [lo, hi],
    )


# ---------------------------------------------------------------- recommendations (app DB)


def recommendations_raw(
    cur: duckdb.DuckDBPyConnection, scope: Scope, app_db_url: str | None, kinds: tuple[str, ...] | None = None
) -> pd.DataFrame | None:
    """Uncached form of ``recommendations`` (reports, tests)."""
    namespaces = RAW["team_namespaces"](cur, scope) if scope.teams is not None else None
    if not app_db_url:
        return None
    import sqlalchemy as sa

    engine = sa.create_engine(app_db_url)
    try:
        if not sa.inspect(engine).has_table("recommendations"):
            return None
        with engine.connect() as conn:
            df = pd.read_sql(sa.text("select * from recommendations order by est_monthly_savings_usd desc"), conn)
    except sa.exc.OperationalError:
        return None
    finally:
        engine.dispose()
    if "status" in df.columns:
        # the recommender keeps resolved ones for history; show the rest (open, and later approved etc.)
        df = df[~df["status"].isin(["resolved", "dismissed"])]
    if kinds is not None:
        df = df[df["kind"].isin(kinds)]
    if namespaces is not None:
        # team leads see recommendations for their own (cluster, namespace) pairs only
        allowed = set(zip(namespaces["cluster"], namespaces["namespace"], strict=True))
        mask = [(c, n) in allowed for c, n in zip(df["cluster"], df["namespace"], strict=True)]
        df = df[mask]
    elif not scope.fleet:
        df = df.iloc[0:0]
    return df.reset_index(drop=True)



# ---------------------------------------------------------------- change outcomes (the loop closed)

# What a face shows of fct_change_outcomes (the API's `outcome`, the Approvals history, the report).
OUTCOME_COLUMNS = (
    "change_id", "outcome_status", "window_days", "before_start_day", "before_end_day", "after_start_day",
    "after_end_day", "cost_before_usd", "cost_after_usd", "gpu_hours_before", "gpu_hours_after",
    "idle_pct_before", "idle_pct_after", "requests_before", "requests_after", "est_monthly_savings_usd",
    "realized_monthly_savings_usd", "realized_to_estimated", "cost_regressed", "requests_regressed", "regression",
)


def _has_table(cur: duckdb.DuckDBPyConnection, name: str) -> bool:
    """A warehouse built before the mart existed has no such table: the faces show nothing, not an error."""
    row = cur.execute("select count(*) from information_schema.tables where table_name = ? "
                      "and table_schema = current_schema()", [name]).fetchone()
    return bool(row and row[0])


def change_outcome(cur: duckdb.DuckDBPyConnection, change_id: str) -> dict[str, Any] | None:
    """One change's row of fct_change_outcomes (JSON-ready: days as ISO strings), None when it has none.
    The caller has already checked that the viewer may see the change (the change service)."""
    if not _has_table(cur, "fct_change_outcomes"):
        return None
    cur.execute(f"select {', '.join(OUTCOME_COLUMNS)} from fct_change_outcomes where change_id = ?", [change_id])
    row = cur.fetchone()
    if row is None:
        return None
    out: dict[str, Any] = {}
    for name, value in zip(OUTCOME_COLUMNS, row, strict=True):
        if isinstance(value, date | datetime):
            value = value.isoformat()
        elif isinstance(value, float) and value != value:  # NaN never leaves the warehouse as a number
            value = None
        out[name] = value
    out.pop("change_id")
    return out


@_query
def change_outcomes(cur: duckdb.DuckDBPyConnection, scope: Scope) -> pd.DataFrame:
    """Every applied change's outcome the viewer may see (node actions, which have no team, need the
    fleet scope), newest first."""
    if not _has_table(cur, "fct_change_outcomes"):
        return pd.DataFrame(columns=["kind", "cluster", "namespace", "target_kind", "target_name", "team",
                                     "status", "applied_at", *OUTCOME_COLUMNS])
    where, params = _team_filter(scope)
    fleet = " or team is null" if scope.fleet else ""
    cols = ", ".join(c for c in OUTCOME_COLUMNS)
    df = _df(cur, f"select kind, cluster, namespace, target_kind, target_name, team, status, applied_at, {cols} "
                  f"from fct_change_outcomes where (true{where}){fleet} order by applied_at desc, change_id",
             params)
    for c in [c for c in df.columns if c.endswith("_day")]:
        if pd.api.types.is_datetime64_any_dtype(df[c]):
            df[c] = df[c].dt.date  # DuckDB dates arrive as midnight timestamps
    return df


@_query
def savings_realized(cur: duckdb.DuckDBPyConnection, scope: Scope, month: date) -> pd.DataFrame:
    """Savings realized in the calendar month of ``month`` (fct_change_savings_monthly), one row:
    realized_savings_usd, changes, days_in_effect (0 / 0 / 0 when none)."""
    scope.require_fleet()
    if not _has_table(cur, "fct_change_savings_monthly"):
        return pd.DataFrame({"realized_savings_usd": [0.0], "changes": [0], "days_in_effect": [0]})
    first = month.replace(day=1)
    return _df(cur, "select coalesce(sum(realized_savings_usd), 0) as realized_savings_usd, "
                    "count(distinct change_id) as changes, coalesce(sum(days_in_effect), 0) as days_in_effect "
                    "from fct_change_savings_monthly where month = ?", [first])


@_query
def change_calibration(cur: duckdb.DuckDBPyConnection, scope: Scope) -> pd.DataFrame:
    """Per recommendation kind, the median of realized ÷ estimated savings (fct_change_calibration)."""
    scope.require_fleet()
    if not _has_table(cur, "fct_change_calibration"):
        return pd.DataFrame(columns=["kind", "changes_applied", "changes_measured", "changes_calibrated",
                                     "median_realized_to_estimated", "est_monthly_savings_usd",
                                     "realized_monthly_savings_usd", "regressions"])
    return _df(cur, "select * from fct_change_calibration order by kind", [])
