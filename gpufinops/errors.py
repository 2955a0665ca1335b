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
