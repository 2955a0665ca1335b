"""``gpufinops ingest ...``: one sub-command per source, each in its own module."""

from __future__ import annotations

import importlib

import typer

ingest_app = typer.Typer(help="Land a source in the lake (idempotent per source, cluster and window).", no_args_is_help=True)

_SOURCE_MODULES = [
    "cli.commands.ingest_k8s",
    "cli.commands.ingest_prometheus",
    "cli.commands.ingest_prices",
    "cli.commands.ingest_billing",
]


def register(app: typer.Typer) -> None:
    for name in _SOURCE_MODULES:
        importlib.import_module(name).register(ingest_app)
    app.add_typer(ingest_app, name="ingest")
