"""Entry point: ``gpufinops [--home DIR] [--config FILE] [--debug] COMMAND ...``."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import typer
from typer import _click as click  # typer 0.29 vendors click: its exceptions and Context are these
from typer.core import TyperGroup

from cli.context import origin_of, report_error, set_debug
from gpufinops.settings import load_settings


class _OneErrorPath(TyperGroup):
    """The CLI's single error path: any exception a command raises becomes one ``error:`` line
    (what to fix) and exit status 2 (bad input or settings) or 1 (a bug); the traceback is shown
    only with ``--debug``. Usage errors, ``typer.Exit`` and Ctrl-C keep click's handling."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, typer.Exit, typer.Abort, KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:  # noqa: BLE001 - the one place every error is reported
            raise typer.Exit(report_error(exc)) from None


app = typer.Typer(
    name="gpufinops",
    help="GPU FinOps chargeback warehouse for Kubernetes.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    cls=_OneErrorPath,
)


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            print(f"gpufinops {version('gpufinops')}")
        except PackageNotFoundError:  # a checkout run without `make install`
            print("gpufinops (not installed)")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    _version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                  help="Print the installed version and exit."),
    home: Path | None = typer.Option(None, "--home", envvar="GPUFINOPS_HOME", help="Folder of the lake, warehouse and app DB [default: ./var]."),
    config: Path | None = typer.Option(None, "--config", envvar="GPUFINOPS_CONFIG", help="YAML settings file."),
    debug: bool = typer.Option(False, "--debug", envvar="GPUFINOPS_DEBUG", help="Print the traceback with an error."),
) -> None:
    set_debug(debug)
    origins = {name: where for name, env, flag in (("home", "GPUFINOPS_HOME", "--home"), ("config", "GPUFINOPS_CONFIG", "--config"))
               if (where := origin_of(ctx, name, env, flag)) != flag}
    ctx.obj = load_settings(home=home, config=config, _origins=origins)


# Command groups register themselves; the mapping (top-level command -> the module registering it, in
# help order) is the CLI's table of contents.
_COMMAND_MODULES = {
    "demo": "cli.commands.demo",
    "demo-cluster": "cli.commands.demo_cluster",
    "build": "cli.commands.build",
    "ingest": "cli.commands.ingest",
    "check": "cli.commands.check",
    "recommend": "cli.commands.recommend",
    "simulate": "cli.commands.simulate",
    "changes": "cli.commands.changes",
    "db": "cli.commands.db",
    "api": "cli.commands.api_tokens",
    "report": "cli.commands.report",
    "budgets": "cli.commands.budgets",
    "export": "cli.commands.export",
    "serve": "cli.commands.serve",
}
_VALUE_OPTIONS = ("--home", "--config")


def invoked_command(argv: list[str]) -> str | None:
    """The top-level command a ``gpufinops`` command line runs (None: none, or only --help / --version)."""
    args = iter(argv)
    for arg in args:
        if arg in _VALUE_OPTIONS:
            next(args, None)
        elif not arg.startswith("-"):
            return arg
    return None


def _modules_for(argv: list[str], entry: str) -> list[str]:
    """The command modules to import: only the invoked command's when this process is the CLI and
    the command is known (each command module imports what it needs; importing all of them costs
    about a second, most of the hourly build's client when a build worker runs the build), else all."""
    name = invoked_command(argv)
    if Path(entry).name in ("gpufinops", "main.py") and name in _COMMAND_MODULES:
        return [_COMMAND_MODULES[name]]
    return list(_COMMAND_MODULES.values())


for _name in _modules_for(sys.argv[1:], sys.argv[0] if sys.argv else ""):
    importlib.import_module(_name).register(app)


if __name__ == "__main__":
    app()
