"""Lookups the change service needs from the warehouse.

- Which team owns a namespace: the warehouse's showback (the latest day's team of each
  (cluster, namespace)), falling back to ``seeds/namespace_teams.csv``. Node actions (namespace None)
  belong to no team: ``None`` = platform-level.
- Which Kubernetes kind a workload is (``dim_workload.workload_kind``), for recommendations whose
  evidence does not carry it.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path

import duckdb

from gpufinops.errors import ConfigError
from gpufinops.project import PROJECT_DIR
from gpufinops.warehouse import connect

__all__ = ["TeamOf", "KindOf", "warehouse_team_resolver", "warehouse_kind_resolver", "seed_team_resolver", "SEED_PATH"]

TeamOf = Callable[[str | None, str | None], str | None]
KindOf = Callable[[str, str | None, str | None], str | None]
SEED_PATH = PROJECT_DIR / "seeds" / "namespace_teams.csv"
_UNASSIGNED = {"", "unassigned", None}


def _seed_map(path: Path) -> dict[str, str]:
    if not path.is_file():
        return {}
    with path.open(newline="") as fh:
        return {row["namespace"]: row["team"] for row in csv.DictReader(fh) if row.get("team")}


def seed_team_resolver(path: Path | None = None) -> TeamOf:
    """namespace -> team from the seed CSV (any cluster)."""
    seeds = _seed_map(path or SEED_PATH)

    def team_of(cluster: str | None, namespace: str | None) -> str | None:
        return seeds.get(namespace) if namespace else None

    return team_of


def warehouse_team_resolver(warehouse_path: Path | str, seed_path: Path | None = None) -> TeamOf:
    """(cluster, namespace) -> team from ``fct_showback_daily`` (read once), else the seed CSV."""
    by_pair: dict[tuple[str, str], str] = {}
    by_ns: dict[str, str] = {}
    con: duckdb.DuckDBPyConnection | None
    try:
        con = connect(warehouse_path)
    except (ConfigError, duckdb.Error):  # no warehouse yet, or a build holds its lock
        con = None
    if con is not None:
        try:
            rows = con.execute(
                """
                select cluster, namespace, team from (
                    select cluster, namespace, team,
                           row_number() over (partition by cluster, namespace
                                              order by day desc, chargeback_usd desc) as rn
                    from fct_showback_daily
                    where namespace is not null and team is not null and team <> 'unassigned'
                ) where rn = 1
                """
            ).fetchall()
        except duckdb.Error:  # an older or partial warehouse: fall back to the seeds
            rows = []
        finally:
            con.close()
        for cluster, namespace, team in rows:
            by_pair[(cluster, namespace)] = team
            by_ns.setdefault(namespace, team)
    seeds = _seed_map(seed_path or SEED_PATH)

    def team_of(cluster: str | None, namespace: str | None) -> str | None:
        if not namespace:
            return None
        if cluster is not None and (cluster, namespace) in by_pair:
            return by_pair[(cluster, namespace)]
        return seeds.get(namespace) or by_ns.get(namespace)

    return team_of


def warehouse_kind_resolver(warehouse_path: Path | str) -> KindOf:
    """(cluster, namespace, workload) -> its top-level owner kind from ``dim_workload`` (read once)."""
    kinds: dict[tuple[str, str | None, str | None], str] = {}
    try:
        con = connect(warehouse_path)
    except (ConfigError, duckdb.Error):  # no warehouse yet, or a build holds its lock
        con = None
    if con is not None:
        try:
            rows = con.execute(
                "select cluster, namespace, workload, workload_kind from dim_workload "
                "where workload is not null and workload_kind is not null"
            ).fetchall()
        except duckdb.Error:
            rows = []
        finally:
            con.close()
        kinds = {(c, n, w): k for c, n, w, k in rows}

    def kind_of(cluster: str, namespace: str | None, workload: str | None) -> str | None:
        return kinds.get((cluster, namespace, workload))

    return kind_of
