"""Reports on the mini warehouse: totals equal the marts, CSVs equal the tables, alerts, the CLI."""

from __future__ import annotations

import importlib.util
from datetime import date
from email import message_from_bytes
from pathlib import Path

import duckdb
import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from dashboards.config import DashboardSettings
from gpufinops.errors import InputError
from gpufinops.settings import load_settings
from reports.build import build_report
from reports.delivery import email_message, webhook_payload
from reports.period import resolve_period


def _support():
    spec = importlib.util.spec_from_file_location("dash_support", Path(__file__).parent / "fixtures/dashboards/support.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


support = _support()


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("home")
    support.build_warehouse(home)
    support.build_app_db(home)
    (home / "budgets.csv").write_text("team,monthly_budget_usd\nalpha,5000\nbeta,100000\n")
    return home


@pytest.fixture
def built(home):
    settings = load_settings(home=home)
    dash = DashboardSettings(budgets_file=home / "budgets.csv")
    con = duckdb.connect(str(home / "warehouse.duckdb"), read_only=True)

    def _build(period: str, audience: str, **kw):
        return build_report(con, settings, dash, period, audience, **kw)

    yield _build, con
    con.close()


def test_periods() -> None:
    assert resolve_period("weekly", date(2026, 11, 2)).start == date(2026, 10, 27)
    month = resolve_period("monthly", date(2026, 11, 30))
    assert (month.start, month.end, month.label) == (date(2026, 11, 1), date(2026, 12, 1), "November 2026")
    assert resolve_period("monthly", date(2026, 11, 2)).label == "November 2026 (to 02 Nov)"


def test_finance_totals_equal_the_marts(built) -> None:
    build, con = built
    rep = build("weekly", "finance")
    assert rep.period.last_day == date(2026, 11, 2)  # the last day with data
    total, charged, unallocated, idle = con.execute(
        """select sum(chargeback_usd),
                  sum(chargeback_usd) filter (where namespace not in ('(unallocated)', '(overhead)', 'kube-system')),
                  sum(direct_cost_usd) filter (where namespace = '(unallocated)'), sum(idle_cost_usd)
           from fct_showback_daily where day between '2026-10-27' and '2026-11-02'"""
    ).fetchone()
    assert rep.totals["total_cost_usd"] == pytest.approx(total)
    assert rep.totals["chargeback_usd"] == pytest.approx(charged)
    assert rep.totals["unallocated_usd"] == pytest.approx(unallocated)
    assert rep.totals["idle_allocated_cost_usd"] == pytest.approx(idle)
    assert rep.totals["chargeback_usd"] == pytest.approx(support.ALPHA_CHARGEBACK + support.BETA_CHARGEBACK)
    assert rep.totals["total_cost_usd"] == pytest.approx(support.NODE_COST + support.OVERHEAD)
    # every CSV attachment is the table behind the report, and sums back to the mart
    csv = pd.read_csv(pd.io.common.BytesIO(rep.csvs()["chargeback_by_team.csv"]))
    assert csv.set_index("team")["chargeback_usd"].to_dict() == pytest.approx(
        {"alpha": support.ALPHA_CHARGEBACK, "beta": support.BETA_CHARGEBACK})
    page = rep.html()
    assert "$1,449.60" in page and "$3,460.80" in page
    assert page.count("data:image/png;base64,") == 2
    assert "bill_reconciliation.csv" in page


def test_budget_alerts_in_finance_and_team_reports(built) -> None:
    build, _ = built
    rep = build("monthly", "finance")
    assert [a.team for a in rep.alerts] == ["alpha"]
    alert = rep.alerts[0]
    # month to date 963.20, run rate 481.60/day for the 28 days left of November
    assert alert.month_to_date_usd == pytest.approx(support.ALPHA_CHARGEBACK)
    assert alert.forecast_usd == pytest.approx(support.ALPHA_CHARGEBACK * (1 + 28 / 2))
    assert alert.level == "forecast ≥ 100% of budget"
    assert "Budget alert" in rep.html()
    assert build("monthly", "team:beta").alerts == []


def test_team_report_is_scoped(built) -> None:
    build, _ = built
    rep = build("weekly", "team:alpha")
    assert rep.totals["chargeback_usd"] == pytest.approx(support.ALPHA_CHARGEBACK)
    assert rep.totals["recommended_savings_usd"] == pytest.approx(1234.5 + 777.0)
    everything = rep.html() + "".join(b.decode() for b in rep.csvs().values())
    assert "train-a" in everything
    for other in ("beta", "serve-b", "rec_b1", "486.4"):
        assert other not in everything


def test_unknown_team_and_bad_audience(built) -> None:
    build, _ = built
    with pytest.raises(InputError, match="no such team"):
        build("weekly", "team:zeta")
    with pytest.raises(InputError, match="finance"):
        build("weekly", "everyone")


def test_email_message_structure(built) -> None:
    build, _ = built
    rep = build("weekly", "finance")
    msg = message_from_bytes(email_message(rep, "gpufinops@x", ["fin@x"]).as_bytes())
    assert "budget alert" in msg["Subject"]
    parts = {p.get_content_type(): p for p in msg.walk()}
    assert {"text/plain", "text/html", "image/png", "text/csv"} <= set(parts)
    html = parts["text/html"].get_payload(decode=True).decode()
    assert 'src="cid:cost_lines"' in html and "data:image" not in html
    names = {p.get_filename() for p in msg.walk() if p.get_content_type() == "text/csv"}
    assert names == set(rep.csvs())


def test_webhook_payload(built) -> None:
    build, _ = built
    payload = webhook_payload(build("weekly", "team:alpha"))
    assert payload["blocks"][0]["text"]["text"].startswith("GPU cost report — team alpha")
    assert "$963.20" in payload["text"]


def test_cli_report_writes_html_and_csvs(home, tmp_path) -> None:
    from cli.commands import report

    app = typer.Typer()

    @app.callback()
    def _root(ctx: typer.Context) -> None:
        ctx.obj = load_settings(home=home)

    report.register(app)
    result = CliRunner().invoke(app, ["report", "--period", "weekly", "--audience", "team:alpha", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    folder = tmp_path / "team-alpha_weekly_2026-10-27"
    assert (folder / "report.html").read_text().count("$963.20") >= 1
    assert {p.name for p in folder.glob("*.csv")} == {
        "team_alpha_daily.csv", "team_alpha_idle_workloads.csv", "team_alpha_budget.csv", "team_alpha_recommendations.csv"}
    bad = CliRunner().invoke(app, ["report", "--period", "daily", "--audience", "finance"])
    assert bad.exit_code == 2 and "weekly or monthly" in bad.output
