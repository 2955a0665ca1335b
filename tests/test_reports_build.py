"""Reports on the dbt-built `fleet` fixture: totals equal the marts, CSVs equal the tables, alerts, the CLI.

The report's figures are checked against sums of the marts (``fct_showback_daily``); the two teams it
looks at are the fleet's two costliest, with a small budget (an alert) and a huge one (none).
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from email import message_from_bytes

import duckdb
import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from gpufinops.errors import InputError
from gpufinops.settings import load_settings
from gpufinops.views.budgets import BudgetSettings
from gpufinops.views.names import SYNTHETIC_LINES
from reports.build import build_report
from reports.delivery import email_message, webhook_payload
from reports.period import resolve_period


def _chargeback(con, team: str, shared: list[str]) -> float:
    """The team's own chargeback in the mart (the teams' namespaces, not the shared or synthetic lines)."""
    return con.execute(
        "select sum(chargeback_usd) from fct_showback_daily where team = ? and not list_contains(?, namespace)",
        [team, [*SYNTHETIC_LINES, *shared]]).fetchone()[0]


@pytest.fixture(scope="module")
def world(fleet, tmp_path_factory):
    """(settings, budgets, lead team, other team, their namespaces, the last day) over the fleet, with an
    app DB of its own holding one recommendation per team."""
    from gpufinops.appdb import open_app_db
    from gpufinops.appdb.schema import recommendations

    tmp = tmp_path_factory.mktemp("reports")
    url = f"sqlite:///{tmp / 'app.db'}"
    settings = load_settings(home=fleet.home, app_db_url=url)
    shared = list(settings.cost.shared_namespaces)
    con = duckdb.connect(str(fleet.warehouse), read_only=True)
    teams = [t for t, in con.execute(
        "select team from fct_showback_daily where not list_contains(?, namespace) and team <> 'unassigned' "
        "group by team order by sum(chargeback_usd) desc", [[*SYNTHETIC_LINES, *shared]]).fetchall()]
    lead, other = teams[0], teams[1]
    spaces = {t: con.execute("select distinct cluster, namespace from fct_showback_daily where team = ? "
                             "order by all", [t]).fetchall() for t in (lead, other)}
    lead_mtd = _chargeback(con, lead, shared)
    last = con.execute("select max(day) from fct_showback_daily").fetchone()[0]
    con.close()
    (tmp / "budgets.csv").write_text(f"team,monthly_budget_usd\n{lead},{lead_mtd * 10:.2f}\n{other},1000000000\n")
    engine = open_app_db(url)
    at = datetime(2026, 11, 1, 23, tzinfo=UTC)
    with engine.begin() as conn:
        for rid, team, savings in (("rec_lead", lead, 1234.5), ("rec_other", other, 4321.0)):
            cluster, ns = spaces[team][0]
            conn.execute(recommendations.insert().values(
                id=rid, kind="reclaim_idle_gpu", cluster=cluster, namespace=ns, workload="w", tier="batch",
                current={"gpus": 1}, proposed={"gpus": 0}, evidence={"window": "7d"},
                est_monthly_savings_usd=savings, confidence=0.9, risk="low", created_at=at, updated_at=at,
                last_seen_at=at, status="open"))
    engine.dispose()
    return settings, BudgetSettings(budgets_file=tmp / "budgets.csv"), lead, other, spaces, last


@pytest.fixture
def built(world, fleet):
    settings, budgets = world[0], world[1]
    con = duckdb.connect(str(fleet.warehouse), read_only=True)

    def _build(period: str, audience: str, **kw):
        return build_report(con, settings, budgets, period, audience, **kw)

    yield _build, con
    con.close()


def test_periods() -> None:
    assert resolve_period("weekly", date(2026, 11, 2)).start == date(2026, 10, 27)
    month = resolve_period("monthly", date(2026, 11, 30))
    assert (month.start, month.end, month.label) == (date(2026, 11, 1), date(2026, 12, 1), "November 2026")
    assert resolve_period("monthly", date(2026, 11, 2)).label == "November 2026 (to 02 Nov)"


def test_finance_totals_equal_the_marts(built, world) -> None:
    build, con = built
    settings, _, lead, other, _, last = world
    rep = build("weekly", "finance")
    assert rep.period.last_day == last  # the last day with data
    start = rep.period.start
    shared = list(settings.cost.shared_namespaces)
    total, charged, unallocated, idle = con.execute(
        """select sum(chargeback_usd),
                  sum(chargeback_usd) filter (where not list_contains($excluded, namespace)),
                  sum(direct_cost_usd) filter (where namespace = '(unallocated)'), sum(idle_cost_usd)
           from fct_showback_daily where day between $start and $last""",
        {"excluded": [*SYNTHETIC_LINES, *shared], "start": start, "last": last}).fetchone()
    assert rep.totals["total_cost_usd"] == pytest.approx(total)
    assert rep.totals["chargeback_usd"] == pytest.approx(charged)
    assert rep.totals["unallocated_usd"] == pytest.approx(unallocated)
    assert rep.totals["idle_allocated_cost_usd"] == pytest.approx(idle)
    node_cost, = con.execute("select sum(node_cost_usd) from fct_node_hourly").fetchone()
    assert total > node_cost  # node cost plus the fixed overhead
    # every CSV attachment is the table behind the report, and sums back to the mart
    csv = pd.read_csv(pd.io.common.BytesIO(rep.csvs()["chargeback_by_team.csv"])).set_index("team")
    for team in (lead, other):
        assert csv.loc[team, "chargeback_usd"] == pytest.approx(_chargeback(con, team, shared))
    page = rep.html()
    assert f"${charged:,.2f}" in page and f"${total:,.2f}" in page
    assert page.count("data:image/png;base64,") == 2
    assert "bill_reconciliation.csv" in page


def test_budget_alerts_in_finance_and_team_reports(built, world) -> None:
    build, con = built
    settings, _, lead, other, _, last = world
    rep = build("monthly", "finance")
    assert [a.team for a in rep.alerts] == [lead]
    alert = rep.alerts[0]
    mtd = _chargeback(con, lead, list(settings.cost.shared_namespaces))
    # one day of data: month to date = that day, run rate = that day, for the days left of November
    assert alert.month_to_date_usd == pytest.approx(mtd)
    assert alert.forecast_usd == pytest.approx(mtd * (1 + 30 - last.day))
    assert alert.level == "forecast ≥ 100% of budget"
    assert "Budget alert" in rep.html()
    assert build("monthly", f"team:{other}").alerts == []


def test_team_report_is_scoped(built, world) -> None:
    build, con = built
    settings, _, lead, other, spaces, _ = world
    rep = build("weekly", f"team:{lead}")
    assert rep.totals["chargeback_usd"] == pytest.approx(_chargeback(con, lead, list(settings.cost.shared_namespaces)))
    assert rep.totals["recommended_savings_usd"] == pytest.approx(1234.5)
    everything = rep.html() + "".join(b.decode() for b in rep.csvs().values())
    assert "rec_lead" in everything and spaces[lead][0][1] in everything
    assert "rec_other" not in everything
    for _cluster, ns in spaces[other]:
        if ns not in {n for _c, n in spaces[lead]}:
            assert ns not in everything


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
    parts = {p.get_content_type(): p for p in msg.walk()}
    assert {"text/plain", "text/html", "image/png", "text/csv"} <= set(parts)
    html = parts["text/html"].get_payload(decode=True).decode()
    assert 'src="cid:cost_lines"' in html and "data:image" not in html
    names = {p.get_filename() for p in msg.walk() if p.get_content_type() == "text/csv"}
    assert names == set(rep.csvs())


def test_webhook_payload(built, world) -> None:
    build, _ = built
    lead = world[2]
    rep = build("weekly", f"team:{lead}")
    payload = webhook_payload(rep)
    assert payload["blocks"][0]["text"]["text"].startswith(f"GPU cost report — team {lead}")
    assert f"${rep.totals['chargeback_usd']:,.2f}" in payload["text"]


def test_cli_report_writes_html_and_csvs(world, fleet, tmp_path) -> None:
    from cli.commands import report

    settings, _, lead, _, _, _ = world
    app = typer.Typer()

    @app.callback()
    def _root(ctx: typer.Context) -> None:
        ctx.obj = settings

    report.register(app)
    result = CliRunner().invoke(app, ["report", "--period", "weekly", "--audience", f"team:{lead}", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    folder = next(tmp_path.glob(f"team-{lead}_weekly_*"))
    assert "Most idle workloads" in (folder / "report.html").read_text()
    expected = {f"team_{lead}_daily.csv", f"team_{lead}_idle_workloads.csv", f"team_{lead}_budget.csv",
                f"team_{lead}_recommendations.csv"}
    from gpufinops.warehouse import connect

    with connect(settings.warehouse_path) as con:  # a team with serving workloads also gets their unit costs
        serving = con.execute("select count(*) from fct_serving_unit_cost_daily where team = ?", [lead]).fetchone()[0]
    assert {p.name for p in folder.glob("*.csv")} == expected | ({f"team_{lead}_serving_unit_cost.csv"} if serving else set())
    bad = CliRunner().invoke(app, ["report", "--period", "daily", "--audience", "finance"])
    assert bad.exit_code == 2 and "weekly or monthly" in bad.output
