"""Demo mode: one API token per role written to the tokens file (replacing earlier ``demo-*`` ones).

``gpufinops serve api --demo`` calls this and prints the tokens, so a laptop demo can try every role.
Teams come from the warehouse (``dim_team``); without one, ``alpha`` stands in.
"""

from __future__ import annotations

from pathlib import Path

from api.auth import TokenStore
from gpufinops.errors import ConfigError
from gpufinops.warehouse import connect

__all__ = ["demo_teams", "write_demo_tokens"]


def demo_teams(warehouse_path: Path, limit: int = 3) -> list[str]:
    try:
        con = connect(warehouse_path)
    except ConfigError:
        return ["alpha"]
    try:
        rows = con.execute(
            "select distinct team from dim_team where team is not null and team not in ('unassigned', 'platform') "
            "order by 1 limit ?", [limit]).fetchall()
    except Exception:  # an older or partial warehouse
        rows = []
    finally:
        con.close()
    return [str(r[0]) for r in rows] or ["alpha"]


def write_demo_tokens(tokens_file: Path, teams: list[str]) -> dict[str, tuple[list[str], str]]:
    """name -> (roles, token) for platform-admin, finance and a lead and a member of each team."""
    wanted: dict[str, list[str]] = {"demo-admin": ["platform-admin"], "demo-admin-2": ["platform-admin"],
                                    "demo-finance": ["finance"]}
    for team in teams:
        wanted[f"demo-lead-{team}"] = [f"team-lead:{team}"]
        wanted[f"demo-member-{team}"] = [f"member:{team}"]
    store = TokenStore(tokens_file)
    return {name: (roles, store.create(name, roles, replace=True)) for name, roles in wanted.items()}
