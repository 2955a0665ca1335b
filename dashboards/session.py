"""The viewer's context for one script run: settings, warehouse, identity (headers or demo picker)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import streamlit as st

from dashboards import queries
from dashboards.config import DEMO_ENV, DashboardSettings, load_dashboard_settings
from dashboards.identity import Identity, Scope, demo_choices, demo_identity, from_headers
from gpufinops.settings import Settings, load_settings
from gpufinops.views.names import FINANCE, PLATFORM_ADMIN, TEAM_LEAD

__all__ = ["ViewContext", "context", "current", "PAGE_ROLES", "DEMO_ROLE_KEY", "request_headers"]

_CTX_KEY = "_gpufinops_view_context"
_ROLE_PARAM_KEY = "_gpufinops_role_param"

DEMO_ROLE_KEY = "demo_role"
# which roles see which page in the navigation (the query layer enforces the data scope regardless)
PAGE_ROLES: dict[str, frozenset[str]] = {
    "home": frozenset({TEAM_LEAD, FINANCE, PLATFORM_ADMIN}),
    "finance": frozenset({FINANCE, PLATFORM_ADMIN}),
    "team": frozenset({TEAM_LEAD, FINANCE, PLATFORM_ADMIN}),
    "platform": frozenset({PLATFORM_ADMIN}),
    # the roles that may approve some change kind; finance too when the change policy names it
    "approvals": frozenset({TEAM_LEAD, PLATFORM_ADMIN}),
}


@dataclass(frozen=True)
class ViewContext:
    settings: Settings
    dashboard: DashboardSettings
    warehouse: queries.Warehouse
    identity: Identity

    @property
    def scope(self) -> Scope:
        return self.identity.scope

    def may_open(self, page: str) -> bool:
        if bool(self.identity.roles & PAGE_ROLES[page]):
            return True
        # finance approves only where a site's change policy lists it as an approver
        return page == "approvals" and self.identity.has("finance") and "finance" in _policy_approvers(
            str(self.settings.change_policy) if self.settings.change_policy else None)


@st.cache_data(ttl=300, show_spinner=False)
def _policy_approvers(policy_path: str | None) -> frozenset[str]:
    from changes.policy import Policy

    try:
        policy = Policy.load(policy_path)
    except Exception:  # a broken policy file: the Approvals page itself says what is wrong
        return frozenset()
    return frozenset(role for kind in policy.kinds.values() for role in kind.approvers)


@st.cache_resource(show_spinner=False)
def _settings_for(env: tuple[str | None, ...]) -> tuple[Settings, DashboardSettings]:
    settings = load_settings()
    return settings, load_dashboard_settings(settings)


def _settings() -> tuple[Settings, DashboardSettings]:
    # keyed by the variables `gpufinops serve` passes, so a changed environment is seen
    return _settings_for(tuple(os.environ.get(v) for v in ("GPUFINOPS_HOME", "GPUFINOPS_CONFIG", DEMO_ENV)))


def request_headers() -> dict[str, str]:
    """The request's headers as set by the auth proxy (a seam the tests replace)."""
    try:
        return dict(st.context.headers)
    except Exception:  # no request (bare script run)
        return {}


def _demo_picker(warehouse: queries.Warehouse) -> Identity:
    try:
        teams = list(queries.teams(warehouse, Scope.everything())["team"])
    except Exception:  # no warehouse yet: the pages say so
        teams = []
    choices = demo_choices(teams)
    # ?role=... picks the role when the link is opened (also in a session the browser reconnects to);
    # the picker writes its choice back to the URL so a reload or a shared link shows the same view
    wanted = st.query_params.get("role")
    if wanted in choices and wanted != st.session_state.get(_ROLE_PARAM_KEY):
        st.session_state[DEMO_ROLE_KEY] = wanted
    elif st.session_state.get(DEMO_ROLE_KEY) not in choices:
        st.session_state[DEMO_ROLE_KEY] = choices[0]
    st.sidebar.warning("**Demo mode** — no sign-in; pick whose view to see.", icon=":material/theater_comedy:")
    choice = st.sidebar.selectbox(
        "View as",
        choices,
        key=DEMO_ROLE_KEY,
        format_func=lambda c: ("Team lead: " + c.split(":", 1)[1] if c.startswith(TEAM_LEAD + ":")
                               else {PLATFORM_ADMIN: "Platform admin"}.get(c, c.title())),
    )
    st.query_params["role"] = choice
    st.session_state[_ROLE_PARAM_KEY] = choice
    return demo_identity(choice)


def context() -> ViewContext:
    settings, dash = _settings()
    warehouse = queries.Warehouse.of(settings.warehouse_path, settings.effective_app_db_url)
    identity = _demo_picker(warehouse) if dash.demo else from_headers(request_headers(), dash.auth)
    ctx = ViewContext(settings=settings, dashboard=dash, warehouse=warehouse, identity=identity)
    st.session_state[_CTX_KEY] = ctx
    return ctx


def current() -> ViewContext:
    """The context the entry script resolved in this run (pages call this)."""
    ctx = st.session_state.get(_CTX_KEY)
    if not isinstance(ctx, ViewContext):
        st.error("Open the dashboards through the entry script: `gpufinops serve dashboard`.")
        st.stop()
    return ctx
