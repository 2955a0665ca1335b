"""``gpufinops ingest prices``: land a cloud price list (and list instance types nobody prices)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from cli.context import console, err_console, handle_errors, settings_of
from gpufinops.errors import InputError

__all__ = ["register"]


@handle_errors
def prices(
    ctx: typer.Context,
    file: Annotated[str | None, typer.Option("--file", help="Price file (azure: the first page, or an API URL).")] = None,
    fmt: Annotated[str | None, typer.Option("--format", help="aws | gcp | azure | csv")] = None,
    region: Annotated[list[str] | None, typer.Option("--region", help="Keep only this region (repeatable).")] = None,
    check_nodes: Annotated[bool, typer.Option("--check-nodes", help="List instance types seen on nodes in the lake that have no price.")] = False,
    fail_on_missing: Annotated[bool, typer.Option("--fail-on-missing", help="With --check-nodes: exit 1 when some are missing.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Parse and summarise; write nothing.")] = False,
) -> None:
    """Land a price list in the `prices` table (one idempotent run per file and provider)."""
    from ingest.prices import ingest_price_file, missing_instance_types, parse_price_file, parser_formats

    settings = settings_of(ctx)
    region = region or []
    if file is None and not check_nodes:
        raise InputError("give --file FILE --format FMT, or --check-nodes")
    if file is not None:
        if fmt is None:
            raise InputError(f"--format is required with --file (one of {', '.join(parser_formats())})")
        if dry_run:
            records = parse_price_file(file, fmt, regions=region)
            by_provider: dict[str, int] = {}
            for r in records:
                by_provider[r.provider] = by_provider.get(r.provider, 0) + 1
            console.print(f"{file}: {len(records)} price rows {by_provider} (dry run, nothing written)")
            non_usd = [r for r in records if not r.is_usd]
        else:
            from ingest.lake import LakeWriter

            writer = LakeWriter(settings.lake_dir, quality=settings)
            result = ingest_price_file(settings.lake_dir, file, fmt, regions=region, writer=writer,
                                       currency=settings.currency)
            table = Table(title=f"prices from {Path(file).name} ({fmt})")
            for col in ("provider", "rows", "window", "run"):
                table.add_column(col)
            for run in result.runs:
                table.add_row(run.provider, str(run.rows),
                              f"{run.window_start:%Y-%m-%d} .. {run.window_end:%Y-%m-%d}", run.run_id)
            console.print(table)
            if not result.runs:
                err_console.print(f"[yellow]warning:[/] {file}: no price rows matched (format {fmt}, regions {region or 'all'})")
            non_usd = result.non_usd
        if non_usd:
            currencies = sorted({r.currency.upper() for r in non_usd})
            rates = ", ".join(f"{c} at {settings.currency.usd_rate(c)} USD" for c in currencies)
            verb = "would be converted" if dry_run else "were converted"
            err_console.print(f"[yellow]note:[/] {len(non_usd)} rows are priced in {', '.join(currencies)}, not USD; "
                              f"they {verb} with currency.rates ({rates})." if all(
                                  settings.currency.usd_rate(c) for c in currencies) else
                              f"[yellow]warning:[/] {len(non_usd)} rows are priced in {', '.join(currencies)}, not USD, "
                              "and no rate is set under `currency.rates`: ingesting this file will be refused.",
                              highlight=False, soft_wrap=True)
    if check_nodes:
        missing = missing_instance_types(settings.lake_dir)
        if not missing:
            console.print("every instance type seen on nodes has a price")
            return
        # Plain lines, one name each, so scripts can grep them.
        console.print(f"{len(missing)} instance types seen on nodes have no price (provider/region/instance_type/capacity_type):")
        for m in missing:
            console.print(f"  {m.name}  ({m.nodes} nodes, seen {m.first_seen:%Y-%m-%d %H:%M} .. {m.last_seen:%Y-%m-%d %H:%M})",
                          soft_wrap=True, highlight=False)
        if fail_on_missing:
            raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("prices")(prices)
