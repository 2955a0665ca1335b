"""Scaffolding: the owner of this command fills in `register`."""

import typer


def register(app: typer.Typer) -> None:
    return None
