"""The Platform page's what-if panel on the dbt-built fleet fixture: a stored result is shown with
its price, and the Run button stores a new one."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from gpufinops.warehouse import connect
from simulator.whatif_service import WhatIfRequest, latest_whatif, run_whatif

APP = str(Path(__file__).resolve().parents[1] / "dashboards" / "app.py")


@pytest.fixture
def env(fleet_copy, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("GPUFINOPS_HOME", str(fleet_copy.home))
    monkeypatch.delenv("GPUFINOPS_CONFIG", raising=False)
    monkeypatch.setenv("GPUFINOPS_DASHBOARD_DEMO", "1")
    with connect(fleet_copy.warehouse) as con:
        cluster = con.execute("select min(cluster) from dim_node where gpu_capacity > 0").fetchone()[0]
    return fleet_copy, cluster


def _platform() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["role"] = "platform-admin"
    at.run()
    at.switch_page("views/platform.py").run()
    return at


def test_whatif_panel_shows_the_stored_result_and_runs_a_new_one(env) -> None:
    fleet, cluster = env
    stored = run_whatif(fleet.home, fleet.warehouse, cluster, WhatIfRequest(policy="gpupacking",
                                                                         baseline_policy="random", seeds=1))
    at = _platform()
    assert not at.exception, [e.value for e in at.exception]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Savings per month"] == f"${stored['monthly_savings_usd']:,.0f}"
    assert metrics["GPUs freed"] == f"{stored['gpus_freed']:,.1f}"
    at.selectbox(key="whatif_policy").set_value("fgd")
    at.button(key="whatif_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert latest_whatif(fleet.home, cluster)["scenario"]["policy"] == "fgd"
