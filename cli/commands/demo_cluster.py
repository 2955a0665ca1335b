"""``gpufinops demo-cluster``: serve the demo fleet as a Kubernetes API, so the change loop can run.

No kube-apiserver runs beside the demo. This builds each cluster's objects from the lake's latest
Kubernetes snapshot (``testsupport.demo_cluster``), serves each on 127.0.0.1 (``--port``, the next
cluster on the next port) with ``testsupport.fakeapi``, writes ``<home>/demo-kubeconfig.yaml`` (one
context per cluster, named after it) and prints how to point ``gpufinops changes plan|apply`` at it.
It runs in the foreground, printing every write it receives, until Ctrl-C. ``demo`` is a single
command, so this is a top-level command of its own.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Annotated

import typer
import yaml
from rich.table import Table

from cli.context import console, handle_errors, settings_of
from gpufinops.errors import ConfigError

__all__ = ["register", "demo_cluster", "KUBECONFIG_NAME"]

KUBECONFIG_NAME = "demo-kubeconfig.yaml"


def register(app: typer.Typer) -> None:
    app.command("demo-cluster")(demo_cluster)


@handle_errors
def demo_cluster(
    ctx: typer.Context,
    port: Annotated[int, typer.Option("--port", help="Port of the first cluster; the next ones follow.")] = 6443,
    cluster: Annotated[list[str] | None, typer.Option(
        "--cluster", help="Serve only this cluster (repeatable) [default: every cluster in the lake].")] = None,
    workload_days: Annotated[int, typer.Option(
        "--workload-days", help="Also serve the workloads last seen in the newest N days (0 replicas; slower).")] = 0,
    kubeconfig: Annotated[Path | None, typer.Option(
        "--kubeconfig", help=f"Where to write the kubeconfig [default: <home>/{KUBECONFIG_NAME}].")] = None,
    once: Annotated[bool, typer.Option("--once", hidden=True, help="Start, write, print, then stop (tests).")] = False,
) -> None:
    """Serve the demo fleet's clusters as Kubernetes APIs on 127.0.0.1 until Ctrl-C."""
    try:
        from testsupport.demo_cluster import build_demo_clusters, kubeconfig_doc, start_demo_servers, stop_demo_servers
        from testsupport.fakeapi import Recorded
    except ModuleNotFoundError as exc:
        if exc.name is None or not exc.name.startswith("testsupport"):
            raise
        raise ConfigError("gpufinops demo-cluster works only in a dev checkout: its fake Kubernetes API lives in "
                          "the test-support package (testsupport/), which the wheel and the image leave out; "
                          "run it from a clone after `make install`") from None

    settings = settings_of(ctx)
    started = time.perf_counter()
    clusters = build_demo_clusters(settings.lake_dir, cluster, workload_days=workload_days)
    servers = start_demo_servers(clusters, port=port)
    try:
        path = kubeconfig or settings.home / KUBECONFIG_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(kubeconfig_doc(servers), sort_keys=False))
        table = Table(title=f"demo clusters from {settings.lake_dir} ({time.perf_counter() - started:.1f}s)")
        for col in ("cluster (context)", "server", "snapshot", "objects"):
            table.add_column(col, overflow="fold")
        for s in servers:
            table.add_row(s.name, s.host, f"{s.cluster.snapshot_at:%Y-%m-%d %H:%M} UTC",
                          ", ".join(f"{k} {n}" for k, n in s.cluster.counts.items()))
        console.print(table)
        home, first = f"--home {settings.home}", servers[0].name
        lines = [f"kubeconfig: {path}", "",
                 "Point the controller at it per change (the context is the change's cluster):",
                 f"  gpufinops {home} changes plan ID --kubeconfig {path} --context {first}",
                 f"  gpufinops {home} changes apply ID --kubeconfig {path} --context {first}",
                 "or once, in a settings file (--config / GPUFINOPS_CONFIG):", "  sources:"]
        lines += [f"    - {{kind: k8s, cluster: {s.name}, kubeconfig: {path}, context: {s.name}}}" for s in servers]
        console.print("\n".join(lines), highlight=False, markup=False, soft_wrap=True)
        if once:
            return

        def show(rec: Recorded) -> None:
            if rec.is_write:
                dry = " (dry-run)" if rec.dry_run else ""
                console.print(f"{rec.method} {rec.path}{dry} -> {rec.status}", highlight=False, markup=False,
                              soft_wrap=True)

        for s in servers:
            s.api.on_request = show
        console.print("serving; Ctrl-C stops", highlight=False)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            console.print("stopped")
    finally:
        stop_demo_servers(servers)
