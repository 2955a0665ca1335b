"""Names every face shows the same way: the synthetic cost lines, the roles, the metrics."""

from __future__ import annotations

import re

__all__ = [
    "UNALLOCATED",
    "OVERHEAD",
    "SYNTHETIC_LINES",
    "COST_LINES",
    "PLATFORM_ADMIN",
    "FINANCE",
    "TEAM_LEAD",
    "MEMBER",
    "FLEET_ROLES",
    "ROLE_PATTERN",
    "ROLE_HELP",
    "team_role",
    "IDLE_PCT",
    "idle_pct_sql",
]

# showback lines that belong to no team (fct_showback_daily): the nodes' cost no pod holds, and the
# clusters' fixed overhead
UNALLOCATED = "(unallocated)"
OVERHEAD = "(overhead)"
SYNTHETIC_LINES = (UNALLOCATED, OVERHEAD)

# the day's cost as lines that add up (the finance page, the finance report)
COST_LINES = {
    "gpu_usd": "GPU",
    "cpu_memory_usd": "CPU / memory",
    "shared_usd": "Shared & overhead",
    "unallocated_usd": "Unallocated (idle capacity)",
}

# the role vocabulary of the API tokens, OIDC groups and the dashboards' proxy groups
PLATFORM_ADMIN = "platform-admin"
FINANCE = "finance"
TEAM_LEAD = "team-lead"  # team-lead:<team>
MEMBER = "member"  # member:<team>
# roles that see every team and the fleet-level (node, cluster, bill) numbers
FLEET_ROLES = frozenset({PLATFORM_ADMIN, FINANCE})
ROLE_PATTERN = re.compile(r"^(platform-admin|finance|(team-lead|member):[A-Za-z0-9][A-Za-z0-9._-]{0,62})$")
ROLE_HELP = "platform-admin, finance, team-lead:<team> or member:<team>"


def team_role(kind: str, team: str) -> str:
    """``team-lead:<team>`` / ``member:<team>``."""
    if kind not in (TEAM_LEAD, MEMBER):
        raise ValueError(f"team role kind {kind!r} must be {TEAM_LEAD} or {MEMBER}")
    return f"{kind}:{team}"


# idle % = idle GPU-hours over MEASURED GPU-hours (DESIGN §3): unmeasured hours are shown, never
# counted as idle or busy. The formula is the warehouse's SQL macro `idle_pct` (macros/faces.sql,
# published by every build); faces call it on their sums.
IDLE_PCT = "idle_pct"


def idle_pct_sql(idle: str = "sum(idle_gpu_hours)", measured: str = "sum(measured_gpu_hours)") -> str:
    """The SQL that selects idle % of the given sums (the warehouse macro)."""
    return f"{IDLE_PCT}({idle}, {measured})"
