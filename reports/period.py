"""Report periods: the week or month that ends on the last day with data (or ``--as-of``)."""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Literal

__all__ = ["PeriodKind", "Period", "resolve_period"]

PeriodKind = Literal["weekly", "monthly"]


@dataclass(frozen=True)
class Period:
    kind: PeriodKind
    start: date
    end: date  # exclusive

    @property
    def last_day(self) -> date:
        return self.end - timedelta(days=1)

    @property
    def label(self) -> str:
        if self.kind == "monthly":
            full = self.last_day.day == calendar.monthrange(self.start.year, self.start.month)[1]
            return f"{self.start:%B %Y}" + ("" if full else f" (to {self.last_day:%d %b})")
        return f"week {self.start:%d %b} – {self.last_day:%d %b %Y}"


def resolve_period(kind: PeriodKind, as_of: date) -> Period:
    """weekly: the 7 days ending ``as_of``; monthly: ``as_of``'s calendar month up to ``as_of``."""
    end = as_of + timedelta(days=1)
    if kind == "weekly":
        return Period(kind, end - timedelta(days=7), end)
    if kind == "monthly":
        return Period(kind, as_of.replace(day=1), end)
    raise ValueError(f"unknown period {kind!r}")
