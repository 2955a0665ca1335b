"""``gpufinops ingest k8s``: snapshots of nodes, pods and namespaces from dump files or the live API."""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from cli.context import console, err_console, handle_errors, settings_of
from gpufinops.errors import ConfigError, InputError
from gpufinops.settings import Settings
from ingest.k8s.settings import K8sSettings, parse_duration

__all__ = ["register"]


def _parse_at(text: str) -> datetime:
    from ingest.prometheus.timeparse import check_time

    try:
        ts = datetime.fromisoformat(text.strip())
        ts = ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)
    except ValueError:
        raise ConfigError(f"--at: {text!r} is not an ISO 8601 time (e.g. 2026-11-29T16:50:00Z)") from None
    except OverflowError:
        raise ConfigError(f"--at {text!r} is out of range: give a time between 1970 and 2200") from None
    return check_time(ts, option="--at")


def _report(snap: Any, record: Any) -> None:
    c = snap.counts
    console.print(
        f"[green]landed[/] snapshot {record.window_start} of cluster {record.cluster}: "
        f"{c['nodes']} nodes, {c['pods']} pods, {c['namespaces']} namespaces (run {record.run_id})",
        highlight=False,
    )


def _ingest_dumps(settings: Settings, cluster: str, patterns: list[str], at: datetime | None) -> None:
    from rich.progress import Progress

    from ingest.k8s.dump import expand_dump_paths, read_dump
    from ingest.k8s.snapshot import land_snapshot, snapshot_start
    from ingest.lake import LakeWriter

    if "-" in patterns:
        if len(patterns) > 1:
            raise ConfigError("--from-dump -: stdin is one snapshot; do not combine it with files")
        from ingest.k8s.dump import parse_dump

        snap = parse_dump(sys.stdin.buffer.read(), "dump on stdin", at or datetime.now(UTC))
        _report(snap, land_snapshot(LakeWriter(settings.lake_dir, quality=settings), cluster, snap))
        return
    paths = expand_dump_paths(patterns)
    if at is not None and len(paths) > 1:
        raise ConfigError(f"--at names one snapshot time but {len(paths)} dump files were given; drop --at to use each file's mtime")
    # Two dumps landing in the same second would replace each other: refuse before writing any.
    seen: dict[datetime, Path] = {}
    for p in paths:
        t = snapshot_start(at or datetime.fromtimestamp(p.stat().st_mtime, tz=UTC))
        if t in seen:
            raise InputError(f"dump files {seen[t]} and {p} have the same snapshot time {t.isoformat()}; pass --at per file")
        seen[t] = p
    writer = LakeWriter(settings.lake_dir, quality=settings)
    with Progress(console=err_console, transient=True, disable=len(paths) < 2) as progress:
        task = progress.add_task("dump files", total=len(paths))
        for p in paths:
            snap = read_dump(p, at)
            _report(snap, land_snapshot(writer, cluster, snap))
            progress.advance(task)


def register(app: typer.Typer) -> None:
    @app.command("k8s")
    @handle_errors
    def ingest_k8s(
        ctx: typer.Context,
        cluster: Annotated[str, typer.Option("--cluster", envvar="GPUFINOPS_CLUSTER", help="Cluster name the rows are landed under.")],
        from_dump: Annotated[list[str] | None, typer.Option(
            "--from-dump", metavar="FILE",
            help="A `kubectl get nodes,pods,namespaces,replicasets,jobs -A -o json` file or glob (- = stdin, taken now); repeatable. Without it: live API.",
        )] = None,
        at: Annotated[str | None, typer.Option("--at", metavar="TS", help="Snapshot time of a single dump file (ISO 8601) (default: the file's mtime).")] = None,
        kubeconfig: Annotated[Path | None, typer.Option("--kubeconfig", envvar="GPUFINOPS_K8S_KUBECONFIG", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config).")] = None,
        context: Annotated[str | None, typer.Option("--context", envvar="GPUFINOPS_K8S_CONTEXT", help="kubeconfig context.")] = None,
        in_cluster: Annotated[bool | None, typer.Option("--in-cluster/--no-in-cluster", help="Use the pod's service account (default: autodetect).")] = None,
        page_size: Annotated[int | None, typer.Option("--page-size", min=1, help="Objects per list page (limit) (default: 500).")] = None,
        timeout: Annotated[str | None, typer.Option("--timeout", metavar="DURATION", help="Read timeout per request, e.g. 60s (default: 60s).")] = None,
        every: Annotated[str | None, typer.Option("--every", metavar="DURATION", help="Live: take a snapshot every interval (e.g. 60s) until interrupted.")] = None,
        iterations: Annotated[int | None, typer.Option("--iterations", min=1, help="Live: stop after N snapshots.")] = None,
        verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log retries and skipped resources.")] = False,
    ) -> None:
        """Land snapshots of nodes, pods and namespaces (source `k8s`) from dump files or the live API."""
        settings = settings_of(ctx)
        logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
        at_ts = _parse_at(at) if at else None
        if from_dump:
            if every or iterations:
                raise ConfigError("--every/--iterations apply to the live API, not to --from-dump")
            _ingest_dumps(settings, cluster, from_dump, at_ts)
            return
        if at_ts is not None:
            raise ConfigError("--at applies to --from-dump; a live snapshot is taken now")
        k8s = K8sSettings.load(
            settings.config, kubeconfig=kubeconfig, context=context, in_cluster=in_cluster, page_size=page_size,
            read_timeout_s=parse_duration(timeout, option="--timeout") if timeout else None,
        )
        every_s = parse_duration(every, option="--every") if every else None
        _ingest_live(settings, cluster, k8s, every_s, iterations)


def _ingest_live(settings: Settings, cluster: str, k8s: K8sSettings, every_s: float | None, iterations: int | None) -> None:
    from ingest.k8s.live import ApiLister, api_client_from, list_targets, run_live
    from ingest.lake import LakeWriter

    lister = ApiLister(api_client_from(k8s), k8s)
    writer = LakeWriter(settings.lake_dir, quality=settings)
    if every_s is not None and iterations is None:
        console.print(f"snapshotting {lister.host} every {every_s:g}s; Ctrl-C to stop", highlight=False)
    try:
        n = run_live(lister, list_targets(k8s), writer, cluster, every_s=every_s, iterations=iterations,
                     on_snapshot=_report)
    except KeyboardInterrupt:
        console.print("stopped")
        return
    if every_s is not None:
        console.print(f"{n} snapshot(s) landed", highlight=False)
