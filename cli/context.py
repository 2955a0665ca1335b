"""Shared CLI plumbing: the settings object in the typer context and error reporting."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from datetime import date, datetime
from functools import wraps
from typing import Any, TypeVar

import typer
from rich.console import Console

from gpufinops.errors import GpufinopsError, InputError
from gpufinops.settings import Settings

__all__ = ["console", "err_console", "settings_of", "handle_errors", "report_error", "debug_enabled", "set_debug", "origin_of"]

console = Console()
err_console = Console(stderr=True)
F = TypeVar("F", bound=Callable[..., Any])


def settings_of(ctx: typer.Context) -> Settings:
    obj = ctx.find_root().obj
    if not isinstance(obj, Settings):
        raise RuntimeError("settings were not initialised by the root callback")
    return obj


_debug = {"on": False}  # set by the root command for this invocation (--debug)


def set_debug(on: bool) -> None:
    _debug["on"] = on


def debug_enabled() -> bool:
    """``--debug`` (or ``GPUFINOPS_DEBUG=1``): print tracebacks with errors."""
    if _debug["on"]:
        return True
    return os.environ.get("GPUFINOPS_DEBUG", "").strip().lower() in ("1", "true", "yes")


def origin_of(ctx: typer.Context, param: str, envvar: str, flag: str) -> str:
    """Where an option's value came from, for messages: the environment variable or the flag."""
    from typer import _click as click  # the click typer vendors

    value = ctx.params.get(param)
    source = ctx.get_parameter_source(param)
    env = os.environ.get(envvar)
    if source == click.core.ParameterSource.ENVIRONMENT or (env is not None and value is not None and flag not in sys.argv
                                                            and _same(env, value)):
        return f"environment variable {envvar}"
    return flag


def _same(text: str, value: Any) -> bool:
    try:
        return str(value) == text or float(text) == float(value)
    except (TypeError, ValueError):
        return False


def _describe(exc: BaseException) -> tuple[str, int]:
    """The one line for a terminal error, and the exit status (2: fix the input; 1: a bug)."""
    if isinstance(exc, GpufinopsError):
        return str(exc), 2
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        what = exc.strerror or str(exc)
        hint = ""
        if isinstance(exc, NotADirectoryError | FileExistsError):
            hint = " (a folder was expected; check --home / GPUFINOPS_HOME and the paths given)"
        elif isinstance(exc, PermissionError):
            hint = " (check the permissions of that path)"
        return f"{where}{what}{hint}", 2
    return (f"unexpected {type(exc).__name__}: {exc} — this is a bug in gpufinops, not in your input; "
            "rerun with --debug for the traceback and report it"), 1


def report_error(exc: BaseException) -> int:
    """Print ``error: <one line>`` (plus the traceback with ``--debug``); returns the exit status."""
    message, code = _describe(exc)
    if debug_enabled():
        import traceback

        err_console.print("".join(traceback.format_exception(exc)), highlight=False, markup=False, soft_wrap=True)
    message = " ".join(message.split("\n")) if "\n" in message else message
    err_console.print(f"[bold red]error:[/] {_escape(message)}", highlight=False, soft_wrap=True)
    logging.getLogger("gpufinops").debug("details", exc_info=exc)
    return code


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def handle_errors(fn: F) -> F:
    """Turn project errors into a one-line message and exit code 2 (no traceback unless --debug).

    The root command group (:mod:`cli.main`) does the same for every other exception, so this is
    only kept so that a command can be invoked on its own."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except GpufinopsError as exc:
            sys.exit(report_error(exc))

    return wrapper  # type: ignore[return-value]


def parse_day(option: str, text: str | None) -> date | None:
    """A YYYY-MM-DD option value as a date (None when not given); a clear error naming the option."""
    if not text:
        return None
    try:
        return datetime.strptime(text, "%Y-%m-%d").date()
    except ValueError:
        raise InputError(f"{option} {text!r}: use YYYY-MM-DD") from None
