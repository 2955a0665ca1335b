"""Entry point: ``gpufinops [--home DIR] [--config FILE] COMMAND ...``."""

from __future__ import annotations

import importlib
from pathlib import Path

import typer

from cli.context import err_console
from gpufinops.errors import GpufinopsError
from gpufinops.settings import load_settings

app = typer.Typer(
    name="gpufinops",
    help="GPU FinOps chargeback warehouse for Kubernetes.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root(
    ctx: typer.Context,
    home: Path | None = typer.Option(None, "--home", envvar="GPUFINOPS_HOME", help="Folder of the lake, warehouse and app DB [default: ./var]."),
    config: Path | None = typer.Option(None, "--config", envvar="GPUFINOPS_CONFIG", help="YAML settings file."),
) -> None:
    try:
        ctx.obj = load_settings(home=home, config=config)
    except GpufinopsError as exc:
        err_console.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(2) from exc


# Command groups register themselves; the list is the CLI's table of contents.
_COMMAND_MODULES = [
    "cli.commands.demo",
    "cli.commands.demo_cluster",
    "cli.commands.build",
    "cli.commands.ingest",
    "cli.commands.check",
    "cli.commands.recommend",
    "cli.commands.changes",
    "cli.commands.db",
    "cli.commands.api_tokens",
    "cli.commands.report",
    "cli.commands.export",
    "cli.commands.serve",
]
for _name in _COMMAND_MODULES:
    importlib.import_module(_name).register(app)


if __name__ == "__main__":
    app()
