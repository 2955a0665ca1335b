"""The API's warehouse reads: the daily mart answers whole-day windows with the hourly mart's numbers, no
DuckDB connection outlives the requests in flight, and a rebuilt file invalidates the cached lookups."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest
from fastapi.testclient import TestClient

from api.warehouse import WarehouseReader, parse_window
from gpufinops.appdb.ids import workload_id

_spec = importlib.util.spec_from_file_location("api_support_wh", Path(__file__).parent / "fixtures/api/support.py")
assert _spec and _spec.loader
support = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(support)

TRAIN_A = workload_id("c1", "alpha-train", "Job", "train-a")


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path: Path = support.dash.build_warehouse(tmp_path_factory.mktemp("wh"))
    return path


def test_whole_day_windows_read_the_daily_mart_with_the_hourly_marts_numbers(warehouse: Path) -> None:
    daily, hourly = WarehouseReader(warehouse), WarehouseReader(warehouse, use_daily=False)
    refs = list(daily.workload_index().values())
    assert len(refs) >= 3
    assert daily.cost_source(parse_window("7d")) == "fct_workload_daily"
    assert daily.cost_source(parse_window("5h")) == "fct_gpu_allocation_hourly"
    assert hourly.cost_source(parse_window("7d")) == "fct_gpu_allocation_hourly"
    nonzero = 0
    for window in ("1d", "2d", "3d", "7d", "2w", "24h", "48h", "5h", "30h"):
        for ref in refs:
            args = (ref.cluster, ref.namespace, ref.kind, ref.name, parse_window(window))
            got, want = daily.workload_cost(*args), hourly.workload_cost(*args)
            assert got == want, (window, ref)
            nonzero += got["cost_usd"] > 0
    assert nonzero > 0
    # one day back: only the last of the mini warehouse's two days
    one = daily.workload_cost("c1", "alpha-train", "Job", "train-a", timedelta(days=1))
    assert one["hours_with_data"] == 24 and one["cost_usd"] == pytest.approx(24 * 15.9, abs=0.01)


def test_requests_in_flight_share_one_connection_and_none_is_held_after_them(warehouse: Path) -> None:
    reader = WarehouseReader(warehouse)
    with reader.request_scope():
        with reader.connection() as a, reader.connection() as b:
            assert a.execute("select 1").fetchone() == b.execute("select 1").fetchone() == (1,)
        reader.workload_cost("c1", "alpha-train", "Job", "train-a", timedelta(days=7))
        assert reader.connections_opened == 1 and reader.holds_connection()
    assert not reader.holds_connection()
    # outside any request: a connection per use, closed after it
    reader.readable()
    assert reader.connections_opened == 2 and not reader.holds_connection()
    # nothing of this process holds the file: a writer can open it
    duckdb.connect(str(warehouse)).close()


def test_the_api_holds_no_warehouse_connection_between_requests(tmp_path: Path) -> None:
    settings, tokens = support.build_home(tmp_path)
    app = support.make_app(settings)
    with TestClient(app) as client:
        for _ in range(3):
            r = client.get(f"/v1/workloads/{TRAIN_A}/cost?window=7d", headers=support.bearer(tokens["finance"]))
            assert r.status_code == 200, r.text
            assert not app.state.ctx.warehouse.holds_connection()
        # `gpufinops build` could write now
        duckdb.connect(str(settings.warehouse_path)).close()


def test_a_rebuilt_warehouse_invalidates_the_cached_lookups(tmp_path: Path) -> None:
    path = support.dash.build_warehouse(tmp_path)
    reader = WarehouseReader(path)
    before = reader.workload_cost("c1", "alpha-train", "Job", "train-a", timedelta(days=1))
    new_id = workload_id("c1", "alpha-train", "Job", "train-new")
    assert new_id not in reader.workload_index()
    con = duckdb.connect(str(path))
    try:
        con.execute("insert into dim_workload select cluster, namespace, workload_kind, 'train-new', team, tenant, "
                    "tier from dim_workload where workload = 'train-a'")
        con.execute("update fct_workload_daily set total_cost_usd = total_cost_usd * 2 where workload = 'train-a'")
        con.execute("update fct_gpu_allocation_hourly set total_cost_usd = total_cost_usd * 2 "
                    "where workload = 'train-a'")
        con.execute("checkpoint")
    finally:
        con.close()
    assert new_id in reader.workload_index()
    after = reader.workload_cost("c1", "alpha-train", "Job", "train-a", timedelta(days=1))
    assert after["cost_usd"] == pytest.approx(2 * before["cost_usd"])


def test_a_warehouse_locked_by_a_writer_answers_503(tmp_path: Path) -> None:
    settings, tokens = support.build_home(tmp_path)
    app = support.make_app(settings)
    writer = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('locked', "
         "flush=True); time.sleep(60)", str(settings.warehouse_path)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "locked"
        with TestClient(app) as client:
            r: Any = client.get(f"/v1/workloads/{TRAIN_A}/cost?window=7d",
                                headers=support.bearer(tokens["finance"]))
        assert r.status_code == 503, r.text
        assert "gpufinops build" in r.json()["detail"]
    finally:
        writer.kill()
        writer.wait()
