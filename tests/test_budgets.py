"""Budgets on the dbt-built mini world (tests/fixtures/faces/mini_lake.py: alpha $481.60/day, beta $243.20/day,
serve-b $240/day, train-a $381.60/day, on 2026-11-01 and 11-02): the run rate and forecast of
fct_budget_run_rate_daily against a hand computation, the breaches of team and workload budgets, a breach
notice delivered to a real local SMTP server (aiosmtpd) once per breach and day, and the API's scoping."""

from __future__ import annotations

import importlib.util
import socket
from datetime import UTC, date, datetime
from email import message_from_bytes, policy
from pathlib import Path
from typing import Any

import duckdb
import pytest
import typer
from aiosmtpd.controller import Controller
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from gpufinops.appdb import open_app_db
from gpufinops.appdb.ids import workload_id
from gpufinops.appdb.schema import workloads
from gpufinops.settings import Settings, load_settings
from gpufinops.views.budgets import BudgetSettings, evaluate
from gpufinops.views.scope import Scope


def _load(name: str, rel: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, Path(__file__).parent / rel)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


api_support = _load("budgets_api_support", "fixtures/api/support.py")
mini = _load("budgets_mini_lake", "fixtures/faces/mini_lake.py")

ALPHA_DAY = mini.ALPHA_CHARGEBACK / 2  # 481.60
BETA_DAY = mini.BETA_CHARGEBACK / 2  # 243.20
SERVE_B_DAY = 24 * 10.0  # 240: serve-b's direct cost, $10/h
ALPHA_MONTHLY, SERVE_B_DAILY, TRAIN_A_DAILY = 10_000.0, 100.0, 1_000.0
SERVE_B = workload_id("c1", "beta-serve", "Deployment", "serve-b")
NOW = datetime(2026, 11, 3, 6, tzinfo=UTC)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Inbox:
    def __init__(self) -> None:
        self.messages: list[tuple[list[str], Any]] = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's hook name)
        self.messages.append((list(envelope.rcpt_tos), message_from_bytes(envelope.content, policy=policy.default)))
        return "250 OK"


@pytest.fixture
def smtp():
    inbox = _Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=_free_port())
    controller.start()
    yield controller.port, inbox
    controller.stop()


def _register(url: str) -> None:
    engine = open_app_db(url)
    with engine.begin() as conn:
        for ns, kind, name, team, budget in (("beta-serve", "Deployment", "serve-b", "beta", SERVE_B_DAILY),
                                             ("alpha-train", "Job", "train-a", "alpha", TRAIN_A_DAILY)):
            conn.execute(workloads.insert().values(
                id=workload_id("c1", ns, kind, name), cluster="c1", namespace=ns, name=name, kind=kind, team=team,
                budget_usd_day=budget, version=1, created_by="test", created_at=NOW, updated_at=NOW))
    engine.dispose()


@pytest.fixture(scope="module")
def world(tmp_path_factory, mini_fleet) -> tuple[Settings, dict[str, str]]:
    """The mini warehouse, its app DB with two registered workloads, a budgets file; (settings, tokens)."""
    home = tmp_path_factory.mktemp("budgets")
    settings, tokens = api_support.build_home(home, mini_fleet)
    _register(settings.effective_app_db_url)
    (home / "budgets.csv").write_text(f"team,monthly_budget_usd\nalpha,{ALPHA_MONTHLY}\nbeta,1000000000\n")
    cfg = home / "cfg.yaml"
    cfg.write_text(f"dashboards:\n  budgets_file: {home / 'budgets.csv'}\n")
    return settings.model_copy(update={"config": cfg}), tokens


def test_run_rate_and_forecast_are_the_hand_computation(world) -> None:
    settings, _ = world
    con = duckdb.connect(str(settings.warehouse_path), read_only=True)
    rows = {(str(d), s): (mtd, rr, left, fc) for d, s, mtd, rr, left, fc in con.execute(
        "select day, scope_id, month_to_date_usd, run_rate_usd_day, days_left, forecast_month_end_usd "
        "from fct_budget_run_rate_daily").fetchall()}
    con.close()
    # 11-02: two days of data, both in the trailing 7-day window; 28 days of November left
    assert rows[("2026-11-02", "team:alpha")] == pytest.approx((2 * ALPHA_DAY, ALPHA_DAY, 28, 2 * ALPHA_DAY + 28 * ALPHA_DAY))
    assert rows[("2026-11-01", "team:beta")] == pytest.approx((BETA_DAY, BETA_DAY, 29, 30 * BETA_DAY))
    key = ("2026-11-02", "workload:c1/beta-serve/Deployment/serve-b")
    assert rows[key] == pytest.approx((2 * SERVE_B_DAY, SERVE_B_DAY, 28, 30 * SERVE_B_DAY))
    # the fleet's total cost (node cost + overhead) is Σ chargeback
    fleet = rows[("2026-11-02", "fleet")]
    assert fleet[0] == pytest.approx(mini.NODE_COST + mini.OVERHEAD)


def _breaches(settings: Settings, scope: Scope, day: date | None = None) -> set[tuple[str, str]]:
    con = duckdb.connect(str(settings.warehouse_path), read_only=True)
    try:
        bs = BudgetSettings(budgets_file=Path(settings.config).parent / "budgets.csv")  # type: ignore[arg-type]
        status, found = evaluate(con.cursor(), scope, bs, settings.effective_app_db_url, day)
    finally:
        con.close()
    assert len(status) == len({r for r in status["scope_id"]})
    return {(b.scope_id, b.basis) for b in found}


def test_breaches_of_team_and_workload_budgets(world) -> None:
    settings, _ = world
    # alpha: run rate 481.60 > 10,000 / 30 per day, forecast 14,448 > 10,000; serve-b: 240 > 100 per day,
    # forecast 7,200 > 30 × 100; train-a (381.60/day, 1,000 budget) and beta (1e9) stay inside
    assert ALPHA_DAY > ALPHA_MONTHLY / 30 and 30 * ALPHA_DAY > ALPHA_MONTHLY and 30 * ALPHA_DAY < 2 * ALPHA_MONTHLY
    expected = {("team:alpha", "run_rate"), ("team:alpha", "forecast"),
                ("workload:c1/beta-serve/Deployment/serve-b", "run_rate"),
                ("workload:c1/beta-serve/Deployment/serve-b", "forecast")}
    assert _breaches(settings, Scope.everything()) == expected
    assert _breaches(settings, Scope.of_teams(["beta"])) == {e for e in expected if "serve-b" in e[0]}
    assert _breaches(settings, Scope.of_teams(["alpha"])) == {e for e in expected if e[0] == "team:alpha"}


def _cli(settings: Settings, config: Path):
    from cli.commands import budgets

    app = typer.Typer()

    @app.callback()
    def _root(ctx: typer.Context) -> None:
        ctx.obj = load_settings(home=settings.home, config=config)

    budgets.register(app)
    return app


def test_breach_notice_is_delivered_by_smtp_once_per_breach_and_day(world, smtp, tmp_path) -> None:
    settings, _ = world
    port, inbox = smtp
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(Path(settings.config).read_text() + f"""
reports:
  smtp: {{host: 127.0.0.1, port: {port}, sender: budgets@gpufinops.test}}
  recipients: {{finance: [cfo@example.com], "team:beta": [beta-lead@example.com]}}
""")
    app = _cli(settings, cfg)
    first = CliRunner().invoke(app, ["budgets", "check", "--send"])
    assert first.exit_code == 0, first.output
    assert "4 breach(es)" in first.output
    assert len(inbox.messages) == 2  # finance (all four) and team:beta (serve-b's two); team:alpha has no channel
    by_rcpt = {tuple(r): m for r, m in inbox.messages}
    finance = by_rcpt[("cfo@example.com",)]
    assert "4 budget(s) exceeded" in finance["Subject"]
    text = finance.get_body(("plain",)).get_content()
    assert "team alpha: run rate $481.60/day > budget $333.33/day on 2026-11-02" in text
    assert "workload beta-serve/Deployment/serve-b (team beta): month-end forecast $7,200.00 > budget $3,000.00" in text
    beta = by_rcpt[("beta-lead@example.com",)]
    csv = next(p for p in beta.iter_attachments() if p.get_filename() == "budget_breaches.csv").get_content()
    lines = csv.strip().splitlines()[1:]
    assert len(lines) == 2 and all("serve-b" in line for line in lines)

    again = CliRunner().invoke(app, ["budgets", "check", "--send"])
    assert again.exit_code == 0, again.output
    assert len(inbox.messages) == 2, "a re-run sent a breach twice"
    assert again.output.count("already sent") == 2

    # another day is another breach: 11-01's go out, once
    other = CliRunner().invoke(app, ["budgets", "check", "--send", "--as-of", "2026-11-01"])
    assert other.exit_code == 0, other.output
    assert len(inbox.messages) == 4
    engine = open_app_db(settings.effective_app_db_url)
    from reports.budget_alerts import sent_notifications

    sent = sent_notifications(engine)
    engine.dispose()
    assert set(sent["status"]) == {"sent"}
    # per day: 4 breaches to finance + 2 to team:beta, each over e-mail
    assert sent.groupby("day").size().to_dict() == {"2026-11-01": 6, "2026-11-02": 6}


def test_a_failed_send_is_retried_not_recorded(world, tmp_path) -> None:
    settings, _ = world
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(Path(settings.config).read_text() + f"""
reports:
  smtp: {{host: 127.0.0.1, port: {_free_port()}, timeout_s: 2}}
  recipients: {{"team:alpha": [alpha@example.com]}}
""")
    res = CliRunner().invoke(_cli(settings, cfg), ["budgets", "check", "--send"])
    assert res.exit_code != 0 and "SMTP 127.0.0.1" in res.output
    engine = open_app_db(settings.effective_app_db_url)
    from reports.budget_alerts import sent_notifications

    assert "team:alpha" not in set(sent_notifications(engine)["audience"])
    engine.dispose()


def test_api_lists_breaches_by_role(world) -> None:
    settings, tokens = world
    app = api_support.make_app(settings, clock=lambda: NOW)
    with TestClient(app) as client:
        def ids(who: str) -> set[str]:
            r = client.get("/v1/budgets/breaches", headers=api_support.bearer(tokens[who]))
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["day"] == "2026-11-02" and body["total"] == len(body["items"])
            return {i["id"] for i in body["items"]}

        everything = ids("finance")
        assert everything == ids("admin") and len(everything) == 4
        assert ids("lead-alpha") == {i for i in everything if i.startswith("team:alpha|")}
        assert ids("lead-beta") == {i for i in everything if "serve-b" in i}
        assert client.get("/v1/budgets/breaches").status_code == 401
        r = client.get("/v1/budgets/breaches", params={"day": "2026-11-01"}, headers=api_support.bearer(tokens["lead-beta"]))
        item = next(i for i in r.json()["items"] if i["basis"] == "run_rate")
        assert item["workload_id"] == SERVE_B and item["value_usd"] == pytest.approx(SERVE_B_DAY)
        assert item["budget_usd"] == SERVE_B_DAILY
