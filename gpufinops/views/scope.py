"""The rows a viewer may read: every face applies it in the query layer (``gpufinops.views.queries``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["AccessDenied", "Scope"]


class AccessDenied(PermissionError):
    """A query asked for rows outside the viewer's scope."""


@dataclass(frozen=True)
class Scope:
    """The rows a viewer may read. Hashable, so cached queries key on it.

    ``teams is None`` means every team; otherwise only those teams' namespaces. ``fleet`` allows the
    fleet-level numbers (nodes, clusters, the bill).
    """

    teams: tuple[str, ...] | None = ()
    fleet: bool = False

    @classmethod
    def everything(cls) -> Scope:
        return cls(teams=None, fleet=True)

    @classmethod
    def of_teams(cls, teams: Iterable[str]) -> Scope:
        return cls(teams=tuple(sorted(set(teams))), fleet=False)

    def allows_team(self, team: str) -> bool:
        return self.teams is None or team in self.teams

    def narrow(self, teams: Sequence[str] | None) -> Scope:
        """The scope limited to ``teams`` (e.g. from a query parameter); never wider than self."""
        if teams is None:
            return self
        wanted = set(teams)
        allowed = wanted if self.teams is None else wanted & set(self.teams)
        # a team-focused view never needs the fleet-level numbers
        return Scope(teams=tuple(sorted(allowed)), fleet=False)

    def require_fleet(self) -> None:
        if not self.fleet:
            raise AccessDenied("fleet-level data needs the finance or platform-admin role")
