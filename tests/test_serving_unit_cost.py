"""Serving unit economics: vLLM counters from a real Prometheus -> serving_requests -> the marts.

The counters are back-filled into Prometheus at the fleet's own times and pod names, so the ingest,
the increase() reading (with a restart that resets every counter of a pod), the pod matching and the
cost per request run end to end on the dbt-built fleet.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import duckdb
import pytest
from typer.testing import CliRunner

from cli.main import app
from ingest.prometheus.api_ingest import ingest_range
from ingest.prometheus.client import PromClient
from ingest.prometheus.queries import ServingRequests, ServingSettings
from testsupport.prometheus_server import Family, LocalPrometheus, backfill, write_openmetrics_blocks

STEP = 60
POINTS = 180  # three hours
RESET_AT = 90  # the server restarts: both finished_reason series start again from 0


def _serving_pod(fleet) -> tuple[str, str, str, str, datetime]:
    con = duckdb.connect(str(fleet.warehouse), read_only=True)
    row = con.execute(
        """select cluster, namespace, pod, workload, min(hour) from fct_gpu_allocation_hourly
           where tier = 'serving' and gpu_hours > 0 group by 1, 2, 3, 4
           having count(distinct hour) >= 5 order by 5, 3 limit 1"""
    ).fetchone()
    con.close()
    assert row is not None
    cluster, ns, pod, workload, first = row
    return cluster, ns, pod, workload, first.replace(tzinfo=UTC) + timedelta(hours=1)  # a full hour after its start


def _families(ns: str, pod: str, t0: datetime) -> list[Family]:
    start = t0.timestamp()
    stop = {"namespace": ns, "pod": pod, "model_name": "e2e-model", "finished_reason": "stop"}
    length = {"namespace": ns, "pod": pod, "model_name": "e2e-model", "finished_reason": "length"}
    gateway = {"namespace": ns, "model_name": "e2e-model"}  # names no pod: unmatched
    ghost = {"namespace": ns, "pod": "ghost-0", "model_name": "e2e-model"}  # a pod the warehouse never saw

    def up(k: int) -> int:
        return k if k < RESET_AT else k - RESET_AT

    req = [(stop, start + STEP * k, float(up(k))) for k in range(POINTS)]
    req += [(length, start + STEP * k, 2.0 * up(k)) for k in range(POINTS)]
    req += [(gateway, start + STEP * k, 7.0 * k) for k in range(POINTS)]
    req += [(ghost, start + STEP * k, 5.0 * k) for k in range(POINTS)]
    tok = {"namespace": ns, "pod": pod, "model_name": "e2e-model"}
    return [
        Family("vllm:request_success_total", req, type="counter"),
        Family("vllm:prompt_tokens_total", [(tok, start + STEP * k, 300.0 * 3 * up(k)) for k in range(POINTS)], type="counter"),
        Family("vllm:generation_tokens_total", [(tok, start + STEP * k, 100.0 * 3 * up(k)) for k in range(POINTS)], type="counter"),
        Family("tgi_request_count_total", [(tok, start + STEP * k, 11.0 * k) for k in range(POINTS)], type="counter"),
    ]


@pytest.fixture(scope="module")
def served(fleet, tmp_path_factory):
    cluster, ns, pod, workload, t0 = _serving_pod(fleet)
    base = tmp_path_factory.mktemp("prom-serving")
    files, _ = write_openmetrics_blocks(base / "om", _families(ns, pod, t0))
    backfill(files, base / "tsdb")
    with LocalPrometheus(base / "tsdb") as prom:
        yield prom.url, cluster, ns, pod, workload, t0


def test_custom_promql_replaces_the_vllm_query(served, tmp_path):
    url, cluster, ns, pod, _, t0 = served
    loader = ServingRequests(ServingSettings(promql={"requests": "last_over_time(tgi_request_count_total[59s])"}))
    with PromClient(url) as client:
        summary = ingest_range(client, tmp_path, "serving", cluster, t0, t0 + timedelta(hours=1), loaders=[loader])
    assert summary.counts.rows == 60
    rows = duckdb.connect().execute(
        f"select max(requests_total), count(*) from read_parquet('{tmp_path}/serving_requests/**/*.parquet')"
    ).fetchone()
    assert rows == (11.0 * 59, 60)


def test_counters_land_and_cost_per_request_comes_from_the_marts(served, fleet_copy):
    url, cluster, ns, pod, workload, t0 = served
    end = t0 + timedelta(seconds=STEP * POINTS)
    with PromClient(url) as client:
        summary = ingest_range(client, fleet_copy.home / "lake", "serving", cluster, t0, end)
    assert summary.counts.skipped_series == 0
    res = CliRunner().invoke(app, ["--home", str(fleet_copy.home), "build", "--select", "stg_serving__hourly+",
                                   "--no-summary"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    con = duckdb.connect(str(fleet_copy.warehouse), read_only=True)
    # the two finished_reason series are summed, and the restart at k=90 reads as a reset:
    # 3 × 89 before it, 0 at it, 3 × 89 after it
    got = con.execute(
        """select sum(requests), sum(prompt_tokens), sum(generation_tokens) from fct_serving_requests_hourly
           where model = 'e2e-model' and matched and workload = ?""", [workload]).fetchone()
    assert got == (3 * 89 * 2, 300 * 3 * 89 * 2, 100 * 3 * 89 * 2)
    unmatched = con.execute(
        """select sum(requests) from fct_serving_requests_hourly
           where model = 'e2e-model' and not matched and workload = '(unmatched)'""").fetchone()[0]
    assert unmatched == 7 * 179 + 5 * 179  # the gateway series and the unknown pod
    day = con.execute(
        """select requests, tokens, cost_usd, direct_cost_usd, shared_cost_usd, cost_per_1k_requests, cost_per_1m_tokens
           from fct_serving_unit_cost_daily where model = 'e2e-model' and matched and workload = ?""",
        [workload]).fetchone()
    requests, tokens, cost, direct, shared, per_1k, per_1m = day
    assert requests == 534 and tokens == 400 * 534
    # the workload serves two models that day (the demo's own and e2e-model): split by requests
    both = con.execute(
        """select sum(cost_usd), sum(direct_cost_usd) from fct_serving_unit_cost_daily
           where matched and cluster = ? and namespace = ? and workload = ? and day = ?""",
        [cluster, ns, workload, t0.date()]).fetchone()
    wl = con.execute(
        """select sum(total_cost_usd) from fct_gpu_allocation_hourly
           where cluster = ? and namespace = ? and workload = ? and cast(hour as date) = ?""",
        [cluster, ns, workload, t0.date()]).fetchone()[0]
    assert both[1] == pytest.approx(wl, rel=1e-9)
    assert both[0] >= both[1] and shared >= 0
    assert per_1k == pytest.approx(cost / requests * 1000, rel=1e-12)
    assert per_1m == pytest.approx(cost / tokens * 1e6, rel=1e-12)
    no_cost = con.execute("select count(*) from fct_serving_unit_cost_daily where not matched and cost_usd is not null").fetchone()[0]
    assert no_cost == 0


def test_demo_serving_pods_report_unit_costs(fleet):
    con = duckdb.connect(str(fleet.warehouse), read_only=True)
    rows = con.execute(
        """select workload, requests, tokens, cost_usd, cost_per_1k_requests, cost_per_1m_tokens
           from fct_serving_unit_cost_daily where matched order by cost_usd desc""").fetchall()
    assert len(rows) >= 5
    assert all(r[1] > 0 and r[4] is not None and r[4] > 0 and r[5] > 0 for r in rows[:5])
    # every request of the demo comes from a pod the warehouse knows
    assert con.execute("select count(*) from fct_serving_requests_hourly where not matched").fetchone()[0] == 0
