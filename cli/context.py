"""Shared CLI plumbing: the settings object in the typer context and error reporting."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import typer
from rich.console import Console

from gpufinops.errors import GpufinopsError
from gpufinops.settings import Settings

__all__ = ["console", "err_console", "settings_of", "handle_errors"]

console = Console()
err_console = Console(stderr=True)
F = TypeVar("F", bound=Callable[..., Any])


def settings_of(ctx: typer.Context) -> Settings:
    obj = ctx.find_root().obj
    if not isinstance(obj, Settings):
        raise RuntimeError("settings were not initialised by the root callback")
    return obj


def handle_errors(fn: F) -> F:
    """Turn project errors into a one-line message and exit code 2 (no traceback)."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except GpufinopsError as exc:
            err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
            logging.getLogger("gpufinops").debug("details", exc_info=True)
            sys.exit(2)

    return wrapper  # type: ignore[return-value]
