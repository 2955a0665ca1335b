"""Who is looking: trusted auth-proxy headers -> roles -> the data scope the query layer enforces.

Behind an auth proxy (oauth2-proxy, Pomerium, an ingress with external auth) the proxy sets the user
and group headers; the app trusts those headers only because the proxy is the sole way in. In demo mode
there is no proxy and the viewer picks a role in a clearly labelled sidebar box instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from dashboards.config import AuthSettings
from gpufinops.views.names import FINANCE, PLATFORM_ADMIN, TEAM_LEAD, team_role
from gpufinops.views.names import FLEET_ROLES as NAMES_FLEET_ROLES
from gpufinops.views.scope import AccessDenied, Scope

__all__ = [
    "ROLES",
    "FLEET_ROLES",
    "AccessDenied",
    "Scope",
    "Identity",
    "from_headers",
    "demo_identity",
    "demo_choices",
]

# the role vocabulary of the API (gpufinops.views.names): platform-admin, finance, team-lead (of the
# teams in Identity.lead_of)
ROLES = (PLATFORM_ADMIN, FINANCE, TEAM_LEAD)
# roles that see every team and the fleet-level (node / cluster) numbers
FLEET_ROLES = NAMES_FLEET_ROLES
# names of the first dashboards, still accepted in `dashboards.auth.group_roles`
_LEGACY_ROLES = {"admin": PLATFORM_ADMIN, "platform": PLATFORM_ADMIN}


@dataclass(frozen=True)
class Identity:
    user: str | None
    groups: tuple[str, ...] = ()
    roles: frozenset[str] = frozenset()
    lead_of: tuple[str, ...] = ()
    demo: bool = False
    notes: tuple[str, ...] = field(default=(), compare=False)

    @property
    def signed_in(self) -> bool:
        return self.user is not None and bool(self.roles)

    @property
    def scope(self) -> Scope:
        if self.roles & FLEET_ROLES:
            return Scope.everything()
        if TEAM_LEAD in self.roles:
            return Scope.of_teams(self.lead_of)
        return Scope(teams=(), fleet=False)

    def has(self, *roles: str) -> bool:
        return bool(self.roles & set(roles))

    @property
    def label(self) -> str:
        parts = sorted(self.roles - {TEAM_LEAD})
        if self.lead_of:
            parts.append("team lead of " + ", ".join(self.lead_of))
        return f"{self.user or 'anonymous'} ({'; '.join(parts) or 'no role'})"


def _header(headers: Mapping[str, str], name: str) -> str | None:
    wanted = name.lower()
    for key, value in headers.items():
        if key.lower() == wanted:
            return value
    return None


def from_headers(headers: Mapping[str, str], auth: AuthSettings) -> Identity:
    """Map the proxy's user/groups headers to roles. Unknown groups grant nothing."""
    user = (_header(headers, auth.user_header) or "").strip() or None
    raw_groups = _header(headers, auth.groups_header) or ""
    groups = tuple(g.strip() for g in raw_groups.split(auth.groups_separator) if g.strip())
    roles: set[str] = set()
    lead_of: set[str] = set()
    for group in groups:
        role = auth.group_roles.get(group)
        role = _LEGACY_ROLES.get(role, role) if role else None
        if role in (PLATFORM_ADMIN, FINANCE):
            roles.add(role)
        elif role and role.startswith(TEAM_LEAD + ":") and len(role) > len(TEAM_LEAD) + 1:
            roles.add(TEAM_LEAD)
            lead_of.add(role.split(":", 1)[1])
        prefix = auth.team_lead_group_prefix
        if prefix and group.startswith(prefix) and len(group) > len(prefix):
            roles.add(TEAM_LEAD)
            lead_of.add(group[len(prefix) :])
    if user is None:
        return Identity(user=None, notes=(f"no `{auth.user_header}` header: not signed in",))
    return Identity(user=user, groups=groups, roles=frozenset(roles), lead_of=tuple(sorted(lead_of)))


def demo_choices(teams: Sequence[str]) -> list[str]:
    """Roles offered by the demo picker (the API's role strings): the fleet roles, then one team lead per team."""
    return [FINANCE, PLATFORM_ADMIN] + [team_role(TEAM_LEAD, t) for t in teams]


def demo_identity(choice: str) -> Identity:
    """Identity for a demo-picker role such as ``finance`` or ``team-lead:ml-research``."""
    if choice.startswith(TEAM_LEAD + ":"):
        team = choice.split(":", 1)[1]
        return Identity(user=f"demo-lead-{team}", roles=frozenset({TEAM_LEAD}), lead_of=(team,), demo=True)
    if choice in FLEET_ROLES:
        user = "demo-admin" if choice == PLATFORM_ADMIN else f"demo-{choice}"
        return Identity(user=user, roles=frozenset({choice}), demo=True)
    raise ValueError(f"unknown demo role {choice!r}")
