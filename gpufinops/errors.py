"""One root exception, split into transient (retry) and terminal (fix the input)."""

from __future__ import annotations

__all__ = [
    "GpufinopsError",
    "TransientError",
    "TerminalError",
    "InputError",
    "SchemaError",
    "ConfigError",
    "ValidationFailed",
    "NotFound",
    "Forbidden",
    "Conflict",
    "PolicyRefused",
    "BadRequest",
]


class GpufinopsError(Exception):
    """Root of every error this project raises on purpose."""


class TransientError(GpufinopsError):
    """Worth retrying with backoff (timeouts, 429, 5xx)."""


class TerminalError(GpufinopsError):
    """Retrying will not help; the message says what to fix."""


class InputError(TerminalError):
    """Bad input: the message names the file, row, series or setting."""


class SchemaError(InputError):
    """Data does not match a landing table's schema."""


class ConfigError(TerminalError):
    """A setting is missing or invalid."""


class ValidationFailed(InputError):
    """A data-quality suite rejected a batch."""


class NotFound(TerminalError):
    """The object does not exist, or the caller may not see it (never tells which)."""


class Forbidden(TerminalError):
    """The caller sees the object but lacks the role; the message names the role needed."""


class Conflict(TerminalError):
    """Stale version, wrong status for the transition, or someone else got there first."""


class PolicyRefused(TerminalError):
    """A change policy gate said no; ``gate`` names it (paused, ticket, four_eyes, approver_role,
    window, blast_radius, expired_approval, stale_target, evidence_age)."""

    def __init__(self, gate: str, message: str) -> None:
        super().__init__(f"policy gate {gate}: {message}")
        self.gate = gate


class BadRequest(InputError):
    """A request is malformed: the message names the field."""
