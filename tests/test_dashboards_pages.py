"""AppTest runs of every page for every role, in demo mode and behind the auth proxy's headers."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from dashboards import session

APP = str(Path(__file__).resolve().parents[1] / "dashboards" / "app.py")


def _support():
    spec = importlib.util.spec_from_file_location("dash_support", Path(__file__).parent / "fixtures/dashboards/support.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


support = _support()


@pytest.fixture(scope="module")
def home(tmp_path_factory, mini_fleet) -> Path:
    home = tmp_path_factory.mktemp("home")
    support.build_warehouse(home, mini_fleet)
    support.build_app_db(home)
    (home / "budgets.csv").write_text("team,monthly_budget_usd\nalpha,5000\nbeta,100000\n")
    (home / "gpufinops.yaml").write_text(f"dashboards:\n  budgets_file: {home / 'budgets.csv'}\n")
    return home


@pytest.fixture
def env(home, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUFINOPS_HOME", str(home))
    monkeypatch.setenv("GPUFINOPS_CONFIG", str(home / "gpufinops.yaml"))
    monkeypatch.setenv("GPUFINOPS_DASHBOARD_DEMO", "1")
    return home


def _app(role: str | None = None, page: str | None = None, **query: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    if role:
        at.query_params["role"] = role
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    if page:
        at.switch_page(f"views/{page}.py").run()
    return at


def _rendered_text(at: AppTest) -> str:
    """Everything a viewer could read: element text, metric values, widget options, table cells."""
    parts = [repr(at._tree)]
    for kind in ("title", "header", "subheader", "markdown", "caption", "text", "info", "warning", "error", "success"):
        parts.extend(str(e.value) for e in getattr(at, kind))
    parts.extend(f"{m.label} {m.value}" for m in at.metric)
    parts.extend(e.label for e in at.expander)
    for df in at.dataframe:
        value = df.value
        parts.append(value.to_csv() if isinstance(value, pd.DataFrame) else str(value))
    for sb in at.selectbox:
        parts.extend(map(str, sb.options))
    return "\n".join(parts)


def _ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def _metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_finance_page_numbers_and_csv_for_every_table(env) -> None:
    at = _app("finance", "finance")
    _ok(at)
    assert at.title[0].value == "Finance"
    m = _metrics(at)
    assert m["Total cost"] == "$3,460.80"
    assert m["Charged back to teams"] == "$1,449.60"
    assert m["Unallocated (idle capacity)"] == "$2,011.20"
    # 2 days of $1,730.40 so far, the same run rate for the 28 days left of November
    assert m["Forecast, end of Nov"] == "$51,912"
    assert len(at.dataframe) >= 5
    assert len(at.get("download_button")) == len(at.dataframe)
    # alpha's forecast (963.20 + 28 days × 481.60 = 14,448) and run rate (481.60 > 5,000 / 30 a day) breach
    # its 5,000 budget (fct_budget_run_rate_daily); beta's 100,000 is neither breached nor alerted
    warnings = " ".join(w.value for w in at.warning)
    assert ("Budget breach — team **alpha**: run rate $481.60/day > budget $166.67/day; "
            "month-end forecast $14,448.00 > budget $5,000.00") in warnings
    assert "**beta**" not in warnings


def test_team_lead_sees_only_their_team(env) -> None:
    at = _app("team-lead:alpha", "team")
    _ok(at)
    assert at.title[0].value == "Team"
    m = _metrics(at)
    assert m["Cost (chargeback)"] == "$963.20"
    assert m["Idle GPU %"] == "78.0%"
    assert m["Estimated monthly savings"] == "$2,011.50"  # rec_a1 + rec_a2
    text = _rendered_text(at)
    assert "train-a" in text and "rec_a1" in text
    assert any("Budget breach — team **alpha**" in w.value for w in at.warning)  # the team's own budget
    # (the demo picker itself lists every team by name; numbers and workloads stay hidden)
    for other in ("beta-serve", "serve-b", "rec_b1", "486.4", "243.2"):
        assert other not in text
    # only the team page is offered
    with pytest.raises(ValueError):
        at.switch_page("views/finance.py")


def test_team_lead_cannot_reach_another_team_by_query_parameter(env) -> None:
    at = _app("team-lead:alpha", "team", team="beta")
    _ok(at)
    assert [e.value for e in at.error] == ["Team `beta` is not one of yours."]
    assert not at.metric and not at.dataframe
    assert "486.4" not in _rendered_text(at)


def test_team_lead_beta_sees_beta(env) -> None:
    at = _app("team-lead:beta", "team")
    _ok(at)
    assert _metrics(at)["Cost (chargeback)"] == "$486.40"
    text = _rendered_text(at)
    assert "alpha-train" not in text and "rec_a1" not in text


def test_finance_may_open_any_team(env) -> None:
    at = _app("finance", "team", team="beta")
    _ok(at)
    assert _metrics(at)["Cost (chargeback)"] == "$486.40"


def test_platform_page(env) -> None:
    at = _app("platform-admin", "platform")
    _ok(at)
    assert at.title[0].value == "Platform"
    m = _metrics(at)
    assert m["GPU capacity"] == "16" and m["Allocated"] == "43.8%" and m["Bin-packing efficiency"] == "50.0%"
    assert m["GPU pods pending (latest hour)"] == "3"
    # the consolidation plan with its moves
    assert [e.label for e in at.expander] == ["c1 / gpu: 2 → 1 nodes (lower bound 1), save $2,628/month"]
    assert "beta-serve/serve-b-7f9" in _rendered_text(at) and "Nodes freed: `n2`" in _rendered_text(at)


@pytest.mark.parametrize("page", ["finance", "team", "platform", "approvals"])
def test_admin_opens_every_page(env, page) -> None:
    at = _app("platform-admin", page)
    _ok(at)
    assert not at.error and at.title[0].value == page.title()


@pytest.mark.parametrize("role,cost", [("finance", "$3,460.80"), ("team-lead:alpha", "$963.20"), ("platform-admin", "$3,460.80")])
def test_home_page_at_a_glance(env, role, cost) -> None:
    at = _app(role)
    _ok(at)
    assert at.title[0].value == "GPU cost at a glance"
    m = _metrics(at)
    assert m["Cost, last 7 days"] == cost
    assert ("Stranded by fragmentation" in m) == (not role.startswith("team-lead"))
    assert [p.label for p in at.get("page_link")] == {
        "finance": ["Finance", "Team"], "team-lead:alpha": ["Team", "Approvals"],
        "platform-admin": ["Finance", "Team", "Platform", "Approvals"]}[role]


def test_demo_picker_switches_role(env) -> None:
    at = _app()
    assert _metrics(at)["Cost, last 7 days"] == "$3,460.80"  # the first choice, finance
    assert any("Demo mode" in w.value for w in at.sidebar.warning)
    at.sidebar.selectbox(key=session.DEMO_ROLE_KEY).set_value("team-lead:beta").run()
    _ok(at)
    assert _metrics(at)["Cost, last 7 days"] == "$486.40"
    assert at.query_params["role"] == "team-lead:beta"  # written back to the URL


def test_headers_mode(env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUFINOPS_DASHBOARD_DEMO")
    monkeypatch.setattr(session, "request_headers", lambda: {})
    at = _app("finance")  # ?role= means nothing without demo mode
    _ok(at)
    assert "not signed in" in at.error[0].value and not at.metric
    monkeypatch.setattr(
        session, "request_headers",
        lambda: {"X-Forwarded-User": "lee", "X-Forwarded-Groups": "gpufinops-lead-beta"},
    )
    at = _app(page="team")
    _ok(at)
    assert at.title[0].value == "Team" and _metrics(at)["Cost (chargeback)"] == "$486.40"
    assert not at.sidebar.warning  # no demo banner
    text = _rendered_text(at)
    assert "alpha" not in text and "963.2" not in text


def test_missing_warehouse_says_what_to_run(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUFINOPS_HOME", str(tmp_path))
    monkeypatch.setenv("GPUFINOPS_DASHBOARD_DEMO", "1")
    monkeypatch.delenv("GPUFINOPS_CONFIG", raising=False)
    at = _app()
    _ok(at)
    assert "gpufinops build" in at.info[0].value

