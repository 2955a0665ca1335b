"""The API's warehouse reads, on the dbt-built `fleet` fixture: the daily mart answers whole-day windows
with the hourly mart's numbers, idle % is over measured hours, concurrent reads share one connection
per published version, and a newly published version is read from the next query on."""

from __future__ import annotations

import os
import shutil
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest

from api.warehouse import WarehouseReader, parse_window
from gpufinops.appdb.ids import workload_id
from gpufinops.warehouse import live_file, published_version, versions_dir
from transform.publish import publish


def test_whole_day_windows_read_the_daily_mart_with_the_hourly_marts_numbers(fleet) -> None:
    daily, hourly = WarehouseReader(fleet.warehouse), WarehouseReader(fleet.warehouse, use_daily=False)
    refs = sorted(daily.workload_index().values(), key=lambda r: r.id)[:12]
    assert len(refs) >= 3
    assert daily.cost_source(parse_window("7d")) == "fct_workload_daily"
    assert daily.cost_source(parse_window("5h")) == "fct_gpu_allocation_hourly"
    assert hourly.cost_source(parse_window("7d")) == "fct_gpu_allocation_hourly"
    nonzero = 0
    for window in ("1d", "2d", "7d", "24h", "48h", "5h", "30h"):
        for ref in refs:
            args = (ref.cluster, ref.namespace, ref.kind, ref.name, parse_window(window))
            got, want = daily.workload_cost(*args), hourly.workload_cost(*args)
            assert got == want, (window, ref)
            nonzero += got["cost_usd"] > 0
    assert nonzero > 0


def test_idle_pct_is_over_measured_hours(small_fleet) -> None:
    """The cost endpoint's idle % divides by measured GPU-hours, not by every allocated hour (the hand-made
    lake's third hour has no DCGM samples; the demo fleet measures every hour)."""
    con = duckdb.connect(str(small_fleet.warehouse), read_only=True)
    row = con.execute(
        "select cluster, namespace, workload_kind, workload, sum(idle_gpu_hours), sum(measured_gpu_hours), "
        "sum(gpu_hours) from fct_workload_daily group by all "
        "having sum(unmeasured_gpu_hours) > 0 and sum(measured_gpu_hours) > 0 order by all limit 1").fetchone()
    con.close()
    assert row is not None, "the small lake has a workload with measured and unmeasured hours"
    cluster, ns, kind, name, idle, measured, allocated = row
    cost = WarehouseReader(small_fleet.warehouse).workload_cost(cluster, ns, kind, name, timedelta(days=7))
    assert cost["idle_pct"] == pytest.approx(round(idle / measured, 4))
    assert cost["idle_pct"] != pytest.approx(round(idle / allocated, 4))
    assert cost["measured_gpu_hours"] + cost["unmeasured_gpu_hours"] == pytest.approx(cost["gpu_hours"], abs=2e-3)
    assert cost["warehouse_version"] == published_version(small_fleet.warehouse)


def test_concurrent_reads_share_one_connection_per_version(fleet) -> None:
    reader = WarehouseReader(fleet.warehouse)
    with reader.connection() as a, reader.connection() as b:
        assert a.execute("select 1").fetchone() == b.execute("select 1").fetchone() == (1,)
    ref = next(iter(reader.workload_index().values()))
    reader.workload_cost(ref.cluster, ref.namespace, ref.kind, ref.name, timedelta(days=1))
    assert reader.connections_opened == 1
    reader.close()
    assert not reader.holds_connection()


def test_a_published_version_is_read_from_the_next_query_on(fleet_copy) -> None:
    """Publishing (the link renamed over) switches the reader between queries and invalidates its
    cached lookups; the old version's connection closes once its last cursor is done."""
    link = Path(fleet_copy.warehouse)
    reader = WarehouseReader(link)
    con = duckdb.connect(str(link), read_only=True)
    cluster, ns, kind, name = con.execute(
        "select cluster, namespace, workload_kind, workload from fct_workload_daily "
        "group by all order by sum(total_cost_usd) desc limit 1").fetchone()
    con.close()
    ref = reader.workload_index()[workload_id(cluster, ns, kind, name)]
    before = reader.workload_cost(ref.cluster, ref.namespace, ref.kind, ref.name, timedelta(days=1))
    old = live_file(link)
    new = versions_dir(link) / "20991231T000000000000Z.duckdb"
    shutil.copyfile(old, new)
    con = duckdb.connect(str(new))
    con.execute("update fct_workload_daily set total_cost_usd = total_cost_usd * 2")
    con.execute("update fct_gpu_allocation_hourly set total_cost_usd = total_cost_usd * 2")
    con.close()
    with reader.connection() as held:  # a request in flight on the old version
        publish(link, new)
        assert not old.exists()  # unlinked at publish; this reader still holds it open
        assert held.execute("select count(*) from fct_showback_daily").fetchone()[0] > 0
        after = reader.workload_cost(ref.cluster, ref.namespace, ref.kind, ref.name, timedelta(days=1))
    assert after["cost_usd"] == pytest.approx(2 * before["cost_usd"], abs=0.02)
    assert after["warehouse_version"] == "20991231T000000000000Z" != before["warehouse_version"]
    assert reader.connections_opened == 2
    # the old file's descriptor is gone: only the new version is open in this process
    fds = {os.path.realpath(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")}
    assert str(new) in fds and not any(f.startswith(str(old)) for f in fds)
    reader.close()
