"""Parse the times and durations the Prometheus ingest accepts on the command line."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from gpufinops.errors import InputError

__all__ = ["parse_time", "parse_duration"]

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_UNIT_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_time(text: str, *, option: str = "time") -> datetime:
    """ISO 8601 (a naive time is UTC), Unix seconds, or ``now``."""
    s = text.strip()
    if s.lower() == "now":
        return datetime.now(UTC)
    try:
        return datetime.fromtimestamp(float(s), tz=UTC)
    except ValueError:
        pass
    try:
        t = datetime.fromisoformat(s.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InputError(f"{option} {text!r} is not an ISO 8601 time, Unix seconds or 'now'") from None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def parse_duration(text: str, *, option: str = "duration") -> float:
    """Prometheus-style durations (``90s``, ``5m``, ``1h30m``) or plain seconds; returns seconds."""
    s = text.strip()
    try:
        seconds = float(s)
    except ValueError:
        parts = _DURATION.findall(s)
        if not parts or "".join(n + u for n, u in parts) != s:
            raise InputError(f"{option} {text!r} is not a duration like 60s, 5m or 1h30m") from None
        seconds = sum(float(n) * _UNIT_S[u] for n, u in parts)
    if seconds <= 0:
        raise InputError(f"{option} {text!r} must be positive")
    return seconds
