"""Settings of the dashboards and reports, read from the ``dashboards:`` section of the config file.

The kernel's ``Settings`` ignores unknown keys, so this section lives beside it in the same YAML file
(``--config`` / ``GPUFINOPS_CONFIG``). ``GPUFINOPS_DASHBOARD_DEMO=1`` turns on demo mode, which is what
``gpufinops serve dashboard --demo`` passes to the Streamlit process.
"""

from __future__ import annotations

import os

from pydantic import BaseModel, Field, ValidationError

from gpufinops.errors import ConfigError
from gpufinops.settings import Settings, config_section
from gpufinops.views.budgets import BudgetSettings

__all__ = ["AuthSettings", "DashboardSettings", "load_dashboard_settings", "DEMO_ENV"]

DEMO_ENV = "GPUFINOPS_DASHBOARD_DEMO"


class AuthSettings(BaseModel):
    """How the auth proxy's trusted headers map to roles."""

    user_header: str = "X-Forwarded-User"
    groups_header: str = "X-Forwarded-Groups"
    groups_separator: str = ","
    # group name -> role, in the API's vocabulary (platform-admin | finance | team-lead:<team>)
    group_roles: dict[str, str] = Field(
        default_factory=lambda: {
            "gpufinops-finance": "finance",
            "gpufinops-platform": "platform-admin",
            "gpufinops-admins": "platform-admin",
        }
    )
    # a group named <prefix><team> makes its members team lead of <team>
    team_lead_group_prefix: str = "gpufinops-lead-"


class DashboardSettings(BudgetSettings):
    """The ``dashboards:`` section; the budget keys (``budgets_file``, ``budget_alert_thresholds``) are
    ``BudgetSettings``', which the reports read too."""

    auth: AuthSettings = Field(default_factory=AuthSettings)
    # visible demo mode: no proxy, the viewer picks a role in the sidebar
    demo: bool = False
    cache_ttl_s: int = 300


def load_dashboard_settings(settings: Settings) -> DashboardSettings:
    data = config_section(settings, "dashboards")
    if os.environ.get(DEMO_ENV, "").lower() in {"1", "true", "yes"}:
        data = {**data, "demo": True}
    try:
        return DashboardSettings(**data)
    except ValidationError as exc:
        raise ConfigError(f"invalid `dashboards` settings: {exc}") from exc
