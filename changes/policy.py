"""The change policy: gates as YAML data, not code paths (DESIGN §5).

``Policy.load(path)`` reads a YAML file (``None`` = the packaged ``default_policy.yaml``; the
settings field ``change_policy`` names a site's own). The service asks it: who may approve a kind and
how many approvals it needs, whether a ticket reference is well-formed, whether an instant falls in
one of a kind's maintenance windows, the blast-radius limits, and how long approvals and evidence stay
valid. The global pause here is OR-ed with the ``control_flags.paused`` row in the app DB.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from gpufinops.errors import ConfigError

__all__ = ["Policy", "KindPolicy", "Window", "BlastRadius", "DEFAULT_POLICY_PATH", "APPROVER_ROLES", "DAYS"]

DEFAULT_POLICY_PATH = Path(__file__).resolve().parent / "default_policy.yaml"
APPROVER_ROLES = ("team-lead", "platform-admin", "finance")
DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_HHMM = re.compile(r"^([01]\d|2[0-3]):[0-5]\d$|^24:00$")

Approver = Literal["team-lead", "platform-admin", "finance"]
Day = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]


def _default_approvers() -> list[Approver]:
    return ["team-lead"]


def _all_days() -> list[Day]:
    return ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]


class KindPolicy(BaseModel):
    """Who approves a kind (``team-lead`` = the lead of the change's team), how many distinct approvers
    it needs, and the maintenance windows it may be applied in (empty = any time)."""

    model_config = ConfigDict(extra="forbid")

    approvers: list[Approver] = Field(default_factory=_default_approvers, min_length=1)
    approvals: int = Field(default=1, ge=1)
    windows: list[str] = Field(default_factory=list)


class Window(BaseModel):
    """Days (of the window's start, local time), start and end ``HH:MM`` in ``tz``; an end at or
    before the start runs past midnight into the next day."""

    model_config = ConfigDict(extra="forbid")

    days: list[Day] = Field(default_factory=_all_days)
    start: str = "00:00"
    end: str = "24:00"
    tz: str = "UTC"

    @field_validator("start", "end")
    @classmethod
    def _hhmm(cls, v: str) -> str:
        if not _HHMM.match(v):
            raise ValueError(f"{v!r} is not HH:MM")
        return v

    @field_validator("tz")
    @classmethod
    def _tz(cls, v: str) -> str:
        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {v!r}") from exc
        return v

    @staticmethod
    def _minutes(hhmm: str) -> int:
        h, m = hhmm.split(":")
        return int(h) * 60 + int(m)

    def contains(self, at: datetime) -> bool:
        local = at.astimezone(ZoneInfo(self.tz))
        minute = local.hour * 60 + local.minute
        start, end = self._minutes(self.start), self._minutes(self.end)
        day = DAYS[local.weekday()]
        yesterday = DAYS[(local.weekday() - 1) % 7]
        if start < end:
            return day in self.days and start <= minute < end
        # past midnight: today's late part, or yesterday's window running into today
        return (day in self.days and minute >= start) or (yesterday in self.days and minute < end)


class BlastRadius(BaseModel):
    """Limits over rolling windows; ``None`` = no limit."""

    model_config = ConfigDict(extra="forbid")

    nodes_drained_per_hour: int | None = Field(default=None, ge=0)
    changes_per_team_per_day: int | None = Field(default=None, ge=0)


class Policy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    paused: bool = False
    ticket_pattern: str | None = None
    approval_ttl_hours: float | None = Field(default=72.0, gt=0)
    evidence_max_age_hours: float | None = Field(default=72.0, gt=0)
    blast_radius: BlastRadius = Field(default_factory=lambda: BlastRadius())
    windows: dict[str, Window] = Field(default_factory=dict)
    kinds: dict[str, KindPolicy] = Field(default_factory=lambda: {"default": KindPolicy()})
    source: str | None = Field(default=None, exclude=True)  # the file it came from, for messages

    @field_validator("ticket_pattern")
    @classmethod
    def _pattern(cls, v: str | None) -> str | None:
        if v:
            try:
                re.compile(v)
            except re.error as exc:
                raise ValueError(f"ticket_pattern {v!r} is not a regular expression: {exc}") from exc
        return v or None

    @model_validator(mode="after")
    def _windows_exist(self) -> Policy:
        for kind, kp in self.kinds.items():
            for name in kp.windows:
                if name not in self.windows:
                    raise ValueError(f"kinds.{kind}.windows names {name!r}, which is not under windows:")
        return self

    @classmethod
    def load(cls, path: Path | str | None = None) -> Policy:
        """Read a policy file; ``None`` = the packaged default. Errors name the file and the field."""
        p = Path(path) if path is not None else DEFAULT_POLICY_PATH
        if not p.is_file():
            raise ConfigError(f"change policy {p} does not exist (settings: change_policy)")
        try:
            data = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"change policy {p} is not valid YAML: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"change policy {p} must hold a mapping at the top level")
        try:
            return cls.model_validate({**data, "source": str(p)})
        except ValidationError as exc:
            where = "; ".join(f"{'.'.join(str(x) for x in e['loc']) or '(top)'}: {e['msg']}" for e in exc.errors())
            raise ConfigError(f"change policy {p} is invalid: {where}") from exc

    def for_kind(self, kind: str) -> KindPolicy:
        return self.kinds.get(kind) or self.kinds.get("default") or KindPolicy()

    def ticket_ok(self, ticket: str | None) -> bool:
        if not self.ticket_pattern:
            return True
        return bool(ticket) and re.fullmatch(self.ticket_pattern, ticket or "") is not None

    def open_window(self, kind: str, at: datetime) -> str | None | Literal[True]:
        """True when the kind has no windows; else the name of a window containing ``at``, or None."""
        names = self.for_kind(kind).windows
        if not names:
            return True
        for name in names:
            if self.windows[name].contains(at):
                return name
        return None

    def window_text(self, kind: str) -> str:
        return "; ".join(
            f"{n}: {','.join(w.days)} {w.start}-{w.end} {w.tz}"
            for n in self.for_kind(kind).windows for w in [self.windows[n]]
        )

