"""Monthly budgets per team, from a small CSV (``team,monthly_budget_usd``) named in the settings."""

from __future__ import annotations

import csv
from pathlib import Path

from gpufinops.errors import InputError

__all__ = ["load_budgets"]


def load_budgets(path: Path) -> dict[str, float]:
    """Team -> monthly budget in USD. A missing file means no budgets; a bad row is an error."""
    if not path.exists():
        return {}
    budgets: dict[str, float] = {}
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        if not reader.fieldnames or not {"team", "monthly_budget_usd"} <= set(reader.fieldnames):
            raise InputError(f"{path}: needs the columns team,monthly_budget_usd")
        for lineno, row in enumerate(reader, start=2):
            team = (row["team"] or "").strip()
            try:
                amount = float(row["monthly_budget_usd"])
            except (TypeError, ValueError):
                raise InputError(f"{path} row {lineno}: monthly_budget_usd {row['monthly_budget_usd']!r} is not a number") from None
            if not team or amount < 0:
                raise InputError(f"{path} row {lineno}: needs a team and a budget >= 0")
            budgets[team] = amount
    return budgets
