"""The loop closed: a change applied on the demo cluster, the following days landed with the change in
effect, dbt builds ``fct_change_outcomes``, and the outcome equals a hand computation from the lake's
inputs (the world's prices, capacities, requests and counters, the reference-rate seed), not from SQL.

World (tests/world_lake.py, cluster c1, two 8×A100 p4de nodes at $40/h on demand): days D0, D1 and the
morning of D2 with every pod; the recommender runs at D2 12:00 and the ``etl`` Job's
``reclaim_idle_gpu`` recommendation is proposed, approved and applied through the controller against
the fake Kubernetes API (the Job is suspended). A second change, on the serving Deployment ``api``
(no recommendation, so no estimate), is recorded as applied through the change service; its pods keep
running but their request counters slow to a third. Then D2 12:00 .. D5 00:00 lands with the state
the cluster shows: the suspended Job has no pods. Rollout day D2 is excluded; the windows are D0-D1
and D3-D4 (2 days each).
"""

from __future__ import annotations

import csv
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner
from world_lake import GIB, PODS, SNAPSHOT_S, T0, write_world_span

from changes.model import Actor
from changes.service import ChangeService
from controller.executor import Executor
from controller.kube import client_from
from gpufinops.settings import Settings
from gpufinops.warehouse import connect
from recommender.engine import run as run_recommender
from recommender.model import HOURS_PER_MONTH
from recommender.store import RecommendationStore
from testsupport.demo_cluster import build_demo_clusters, kubeconfig_doc, start_demo_servers, stop_demo_servers
from transform import run_build

ROOT = Path(__file__).resolve().parents[1]
APPLY_AT = T0 + timedelta(days=2, hours=12)
END = T0 + timedelta(days=5)
JOB = "/apis/batch/v1/namespaces/data/jobs/etl"
STEP = timedelta(seconds=SNAPSHOT_S)
RATE_BEFORE, RATE_AFTER = 600.0, 200.0  # requests per snapshot interval per api pod


def _counter(pod: str, ts: datetime) -> float:
    """The api pods' cumulative request counter: RATE_BEFORE per interval until APPLY_AT, then RATE_AFTER."""
    k, kc = (ts - T0) // STEP, (APPLY_AT - T0) // STEP
    return RATE_BEFORE * min(k, kc) + RATE_AFTER * max(0, k - kc)


def _day(n: int) -> str:
    return (T0 + timedelta(days=n)).date().isoformat()


@pytest.fixture(scope="module")
def loop(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("outcomes")
    home = root / "home"
    home.mkdir()
    (home / "gpufinops.yaml").write_text(f"snapshot_interval_s: {SNAPSHOT_S}\n")
    settings = Settings(home=home, config=home / "gpufinops.yaml")
    write_world_span(settings.lake_dir, T0, APPLY_AT, list(PODS), counter=_counter, prices=True)
    run_build(settings, full_refresh=True)
    run_recommender(settings, now=APPLY_AT)
    recs = {(r["kind"], r["workload"]): r for r in RecommendationStore(settings.effective_app_db_url).list()}
    rec = recs[("reclaim_idle_gpu", "etl")]

    clock = iter(APPLY_AT + timedelta(seconds=s) for s in range(10_000))
    svc = ChangeService.from_settings(settings, clock=lambda: next(clock))
    dana, lee = Actor("dana", frozenset({"team-lead:data-eng"})), Actor("lee", frozenset({"team-lead:data-eng"}))
    (cluster,) = build_demo_clusters(settings.lake_dir)
    servers = start_demo_servers([cluster], port=0)
    try:
        kc = root / "kubeconfig.yaml"
        kc.write_text(yaml.safe_dump(kubeconfig_doc(servers)))
        reclaim = svc.create_from_recommendation(rec["id"], actor=dana, ticket="FIN-101")
        svc.approve(reclaim.id, actor=lee, reason="idle for days")
        applied = Executor(svc, client_from(kc, "c1")).apply(reclaim.id, lee)
        assert applied.status == "verified", applied.error
        job = servers[0].api.get(JOB)
        assert job is not None and job["spec"]["suspend"] is True
        # The days after, as the cluster now is: a suspended Job runs no pods.
        in_effect = [p for p in PODS if not (PODS[p][3] == "Job" and job["spec"]["suspend"]
                                             and PODS[p][2] == job["metadata"]["name"])]
    finally:
        stop_demo_servers(servers)
    wes, ann = Actor("wes", frozenset({"team-lead:web"})), Actor("ann", frozenset({"team-lead:web"}))
    serving = svc.create(actor=wes, kind="set_autoscaling", cluster="c1", namespace="web", target_kind="Deployment",
                         target_name="api", current={"replicas": 2}, proposed={"min_replicas": 1}, ticket="WEB-9")
    svc.approve(serving.id, actor=ann, reason="try it")
    svc.begin_apply(serving.id, actor=ann)
    svc.finish_apply(serving.id, actor=ann, ok=True, result={"phase": "applied"})

    write_world_span(settings.lake_dir, APPLY_AT, END, in_effect, counter=_counter, source="test-after")
    runner = CliRunner()
    from cli.main import app

    for _ in range(2):  # the export is idempotent: a re-run replaces the slice
        res = runner.invoke(app, ["--home", str(home), "ingest", "changes"])
        assert res.exit_code == 0, res.output
    build = run_build(settings)
    con = connect(settings.warehouse_path, read_only=True)
    try:
        rows = _records(con, "select * from fct_change_outcomes order by kind")
        calib = _records(con, "select * from fct_change_calibration order by kind")
        monthly = _records(con, "select * from fct_change_savings_monthly")
    finally:
        con.close()
    return {"settings": settings, "rec": rec, "reclaim": reclaim.id, "serving": serving.id, "in_effect": in_effect,
            "outcomes": {r["change_id"]: r for r in rows}, "calibration": {r["kind"]: r for r in calib},
            "monthly": monthly, "build": build, "export_output": res.output}


def _records(con: Any, sql: str) -> list[dict[str, Any]]:
    cur = con.execute(sql)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _rates() -> tuple[float, float]:
    with (ROOT / "seeds" / "reference_rates.csv").open() as fh:
        row = next(r for r in csv.DictReader(fh) if (r["provider"], r["region"]) == ("aws", "us-east-1"))
    return float(row["vcpu_usd_per_hour"]), float(row["gib_usd_per_hour"])


def _pod_cost_per_hour(lake: Path, pod: str) -> float:
    """By hand: the node price split by the residual rule, the pod charged on max(request, usage)."""
    prices = [r for f in sorted((lake / "prices").rglob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    price = next(p["usd_per_hour"] for p in prices if p["capacity_type"] == "on_demand")
    r_cpu, r_mem = _rates()
    cpus, gib, gpus = 96.0, 1024.0, 8  # world_lake._node_row capacity
    gpu_rate = (price - cpus * r_cpu - gib * r_mem) / gpus  # list price = node price: CPU/GiB keep their rates
    _n, _ns, _wl, _k, _t, pod_gpus, _u, cpu_req, mem_req, _a = PODS[pod]
    return pod_gpus * gpu_rate + max(cpu_req, 0.5) * r_cpu + max(mem_req, 2 * GIB) / GIB * r_mem


def _requests_by_day(pods: list[str]) -> dict[str, float]:
    """Σ counter increases per UTC day of the api pods' samples (the first sample adds nothing)."""
    out: dict[str, float] = {}
    for p in pods:
        ts, prev = T0, None
        while ts < END:
            v = _counter(p, ts)
            if prev is not None:
                out[ts.date().isoformat()] = out.get(ts.date().isoformat(), 0.0) + (v - prev)
            prev, ts = v, ts + STEP
    return out


def test_reclaimed_job_outcome_matches_a_hand_computation(loop: dict[str, Any]) -> None:
    o = loop["outcomes"][loop["reclaim"]]
    assert "etl-1" not in loop["in_effect"]
    assert (o["outcome_status"], o["status"], o["kind"]) == ("measured", "verified", "reclaim_idle_gpu")
    # the rollout day (D2) is out; the windows are the 2 complete days on each side
    assert (o["before_days_available"], o["after_days_available"], o["window_days"]) == (2, 2, 2)
    assert [str(o[k]) for k in ("before_start_day", "before_end_day", "after_start_day", "after_end_day")] == \
        [_day(0), _day(1), _day(3), _day(4)]
    hourly = _pod_cost_per_hour(loop["settings"].lake_dir, "etl-1")
    assert o["cost_before_usd"] == pytest.approx(48 * hourly, rel=1e-9)
    assert o["cost_after_usd"] == 0
    assert (o["gpu_hours_before"], o["gpu_hours_after"]) == (pytest.approx(48.0), 0)
    assert o["idle_pct_before"] == pytest.approx(1.0) and o["idle_pct_after"] is None  # nothing measured after
    realized = 48 * hourly / (2 * 24) * HOURS_PER_MONTH
    assert o["realized_monthly_savings_usd"] == pytest.approx(realized, rel=1e-9)
    est = loop["rec"]["est_monthly_savings_usd"]
    assert o["est_monthly_savings_usd"] == pytest.approx(est)
    assert o["realized_to_estimated"] == pytest.approx(realized / est, rel=1e-9)
    assert not o["regression"] and not o["cost_regressed"] and not o["requests_regressed"]
    cal = loop["calibration"]["reclaim_idle_gpu"]
    assert (cal["changes_applied"], cal["changes_measured"], cal["changes_calibrated"]) == (1, 1, 1)
    assert cal["median_realized_to_estimated"] == pytest.approx(realized / est, rel=1e-9)
    # savings realized in November: D3 and D4 (complete days in effect after the rollout) at the daily saving
    (m,) = [r for r in loop["monthly"] if r["change_id"] == loop["reclaim"]]
    assert str(m["month"]) == "2026-11-01" and m["days_in_effect"] == 2
    assert m["realized_savings_usd"] == pytest.approx(2 * 24 * hourly, rel=1e-9)


def test_serving_change_with_fewer_requests_is_a_regression(loop: dict[str, Any]) -> None:
    o = loop["outcomes"][loop["serving"]]
    assert (o["outcome_status"], o["status"], o["window_days"]) == ("measured", "applied", 2)
    api = [p for p in PODS if PODS[p][2] == "api"]
    per_day = _requests_by_day(api)
    assert o["requests_before"] == pytest.approx(per_day[_day(0)] + per_day[_day(1)])
    assert o["requests_after"] == pytest.approx(per_day[_day(3)] + per_day[_day(4)])
    assert o["requests_after"] == pytest.approx(o["requests_before"] * RATE_AFTER / RATE_BEFORE, rel=0.01)
    cost = 48 * sum(_pod_cost_per_hour(loop["settings"].lake_dir, p) for p in api)
    assert o["cost_before_usd"] == pytest.approx(cost, rel=1e-9) and o["cost_after_usd"] == pytest.approx(cost, rel=1e-9)
    assert o["requests_regressed"] and o["regression"] and not o["cost_regressed"]
    assert o["est_monthly_savings_usd"] is None and o["realized_to_estimated"] is None
    cal = loop["calibration"]["set_autoscaling"]
    assert cal["changes_calibrated"] == 0 and cal["regressions"] == 1


def test_export_lands_each_change_once_and_a_rerun_replaces_it(loop: dict[str, Any]) -> None:
    lake = loop["settings"].lake_dir
    files = sorted((lake / "applied_changes").glob("cluster=*/day=*/*.parquet"))
    rows = [r for f in files for r in pq.read_table(f).to_pylist()]
    assert sorted(r["change_id"] for r in rows) == sorted([loop["reclaim"], loop["serving"]])
    reclaim = next(r for r in rows if r["change_id"] == loop["reclaim"])
    assert reclaim["applied_at"] >= APPLY_AT.astimezone(UTC) and reclaim["status"] == "verified"
    assert reclaim["est_monthly_savings_usd"] == pytest.approx(loop["rec"]["est_monthly_savings_usd"])
    assert "2 change(s) of cluster c1" in loop["export_output"]
    runs = [json.loads(p.read_text()) for p in (lake / "_runs").glob("*.json")]
    assert sum(1 for r in runs if r["source"] == "app-db" and r["status"] == "committed") == 2


def test_hours_per_month_var_is_the_recommenders() -> None:
    doc = yaml.safe_load((ROOT / "dbt_project.yml").read_text())
    assert float(doc["vars"]["hours_per_month"]) == HOURS_PER_MONTH


def test_api_change_carries_its_outcome(loop: dict[str, Any]) -> None:
    from fastapi.testclient import TestClient

    from api.app import create_app
    from api.auth import TokenStore
    from api.config import ApiSettings

    settings = loop["settings"]
    store = TokenStore(settings.home / "api-tokens.yaml")
    lead, other = store.create("lee", ["team-lead:data-eng"]), store.create("wes", ["team-lead:web"])
    app = create_app(settings, api_settings=ApiSettings(), clock=lambda: END)
    with TestClient(app) as client:
        res = client.get(f"/v1/changes/{loop['reclaim']}", headers={"Authorization": f"Bearer {lead}"})
        assert res.status_code == 200, res.text
        out = res.json()["outcome"]
        mart = loop["outcomes"][loop["reclaim"]]
        assert out["outcome_status"] == "measured" and out["window_days"] == 2
        assert out["realized_monthly_savings_usd"] == pytest.approx(mart["realized_monthly_savings_usd"], rel=1e-12)
        assert out["realized_to_estimated"] == pytest.approx(mart["realized_to_estimated"], rel=1e-12)
        assert out["after_start_day"] == _day(3) and out["idle_pct_after"] is None and out["regression"] is False
        res = client.get(f"/v1/changes/{loop['reclaim']}", headers={"Authorization": f"Bearer {other}"})
        assert res.status_code == 404  # another team's change, outcome included, is not found


def test_monthly_report_shows_savings_realized(loop: dict[str, Any]) -> None:
    from gpufinops.views.budgets import BudgetSettings
    from reports.build import build_report

    settings = loop["settings"]
    con = connect(settings.warehouse_path, read_only=True)
    try:
        report = build_report(con, settings, BudgetSettings(), "monthly", "finance")
    finally:
        con.close()
    want = sum(r["realized_savings_usd"] for r in loop["monthly"])
    assert report.totals["savings_realized_usd"] == pytest.approx(want, rel=1e-12) and want > 0
    assert set(report.tables["change_outcomes"]["change_id"]) == {loop["reclaim"], loop["serving"]}
    assert "Savings realized by applied changes" in report.html() and f"${want:,.2f}" in report.html()


def test_finance_and_approvals_pages_show_outcomes(loop: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("GPUFINOPS_HOME", str(loop["settings"].home))
    monkeypatch.setenv("GPUFINOPS_CONFIG", str(loop["settings"].config))
    monkeypatch.delenv("GPUFINOPS_CHANGE_POLICY", raising=False)
    monkeypatch.setenv("GPUFINOPS_DASHBOARD_DEMO", "1")
    want = sum(r["realized_savings_usd"] for r in loop["monthly"])

    def page(role: str, name: str) -> AppTest:
        at = AppTest.from_file(str(ROOT / "dashboards" / "app.py"), default_timeout=120)
        at.query_params["role"] = role
        at.run()
        at.switch_page(f"views/{name}.py").run()
        assert not at.exception, [e.value for e in at.exception]
        return at

    fin = page("finance", "finance")
    metric = next(m for m in fin.metric if m.label.startswith("Savings realized this month"))
    assert metric.value == f"${want:,.2f}"
    appr = page("platform-admin", "approvals")
    history = next(df.value for df in appr.dataframe if "realized_monthly_savings_usd" in df.value.columns)
    assert set(history["change_id"]) == {loop["reclaim"], loop["serving"]}
    lead = page("team-lead:web", "approvals")  # a team lead sees its own team's outcomes only
    shown = [df.value for df in lead.dataframe if "realized_monthly_savings_usd" in df.value.columns]
    assert [set(d["change_id"]) for d in shown] == [{loop["serving"]}]
