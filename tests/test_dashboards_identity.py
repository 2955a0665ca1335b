"""Trusted headers -> roles -> scope; the scope can only ever narrow."""

from __future__ import annotations

import pytest

from dashboards.config import AuthSettings, load_dashboard_settings
from dashboards.identity import Scope, demo_choices, demo_identity, from_headers
from gpufinops.settings import load_settings

AUTH = AuthSettings()


def test_headers_map_groups_to_roles_case_insensitively() -> None:
    ident = from_headers(
        {"x-forwarded-user": "ana@example.com", "X-FORWARDED-GROUPS": "gpufinops-finance, everyone"}, AUTH
    )
    assert ident.user == "ana@example.com"
    assert ident.roles == {"finance"}
    assert ident.scope == Scope.everything()


def test_team_lead_group_prefix_scopes_to_that_team() -> None:
    ident = from_headers(
        {"X-Forwarded-User": "bo", "X-Forwarded-Groups": "gpufinops-lead-alpha,gpufinops-lead-gamma"}, AUTH
    )
    assert ident.roles == {"team-lead"}
    assert ident.scope.teams == ("alpha", "gamma")
    assert not ident.scope.fleet
    assert ident.scope.allows_team("alpha") and not ident.scope.allows_team("beta")


def test_no_user_header_or_unknown_groups_grant_nothing() -> None:
    assert not from_headers({"X-Forwarded-Groups": "gpufinops-admins"}, AUTH).signed_in
    ident = from_headers({"X-Forwarded-User": "eve", "X-Forwarded-Groups": "admins,gpufinops-lead-"}, AUTH)
    assert not ident.signed_in and ident.scope == Scope(teams=(), fleet=False)


def test_configured_headers_and_groups(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "dashboards:\n  auth:\n    user_header: X-Auth-Request-Email\n    groups_header: X-Auth-Request-Groups\n"
        "    groups_separator: ';'\n    group_roles: {finops: finance}\n    team_lead_group_prefix: 'lead:'\n"
    )
    monkeypatch.delenv("GPUFINOPS_DASHBOARD_DEMO", raising=False)
    dash = load_dashboard_settings(load_settings(config=cfg))
    assert not dash.demo
    ident = from_headers({"X-Auth-Request-Email": "c@x", "X-Auth-Request-Groups": "finops;lead:beta"}, dash.auth)
    assert ident.roles == {"finance", "team-lead"} and ident.lead_of == ("beta",)
    # finance sees everything even though it also leads one team
    assert ident.scope.teams is None


def test_narrow_never_widens() -> None:
    lead = Scope.of_teams(["alpha"])
    assert lead.narrow(["beta"]).teams == ()
    assert lead.narrow(["alpha", "beta"]).teams == ("alpha",)
    assert Scope.everything().narrow(["beta"]) == Scope(teams=("beta",), fleet=False)


def test_demo_roles() -> None:
    # the API's role strings (gpufinops.views.names)
    assert demo_choices(["alpha"]) == ["finance", "platform-admin", "team-lead:alpha"]
    assert demo_identity("team-lead:alpha").scope.teams == ("alpha",)
    assert demo_identity("platform-admin").scope.fleet
    with pytest.raises(ValueError):
        demo_identity("root")
