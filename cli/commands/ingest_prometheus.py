"""``gpufinops ingest dcgm`` and ``gpufinops ingest usage``: Prometheus (HTTP API or a saved scrape)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from cli.context import console, handle_errors, settings_of
from gpufinops.errors import ConfigError, InputError
from gpufinops.settings import Settings, config_section
from ingest.prometheus import (
    PromClient,
    SplitLimits,
    ingest_exposition_file,
    ingest_range,
    resolve_start,
    time_windows,
)
from ingest.prometheus.plan import align_down
from ingest.prometheus.queries import (
    CpuCores,
    MemoryWorkingSet,
    MetricLoader,
    ServingGenerationTokens,
    ServingPromptTokens,
    ServingRequests,
    ServingSettings,
    UsageSettings,
)
from ingest.prometheus.timeparse import parse_duration, parse_time

__all__ = ["register"]

_END_LAG_S = 120  # default --end: a little before now, so the newest scrapes have landed

_URL = typer.Option(None, "--prometheus", envvar="GPUFINOPS_PROMETHEUS_URL", help="Prometheus (or Thanos/Mimir) base URL.")
_CLUSTER = typer.Option(..., "--cluster", envvar="GPUFINOPS_CLUSTER", help="Cluster name the rows are landed under.")
_START = typer.Option(None, "--start", help="ISO time or Unix seconds; default: the stored watermark.")
_END = typer.Option(None, "--end", help=f"ISO time or Unix seconds; default: now - {_END_LAG_S}s.")
_STEP = typer.Option("60s", "--step", help="Query resolution.")
_MAX_SERIES_PTS = typer.Option(11_000, "--max-points-per-series", help="Points per series per request (Prometheus caps it at 11,000).")
_MAX_REQ_PTS = typer.Option(500_000, "--max-points-per-request", help="Series x points per request; larger fleets are split by series.")
_MAX_WINDOW = typer.Option("1d", "--max-window", help="Longest window per lake run.")
_TIMEOUT = typer.Option("60s", "--timeout", help="HTTP timeout per request.")
_FROM_FILE = typer.Option(None, "--from-file", help="A saved dcgm-exporter /metrics scrape (text or OpenMetrics).")
_AT = typer.Option(None, "--at", help="Sample time for a file without timestamps (default: its mtime).")
_RETRIES = typer.Option(4, "--retries", help="Retries (with exponential backoff) on timeouts, 429 and 5xx.")
_RATE_WINDOW = typer.Option("5m", "--rate-window", help="Window of rate() over the CPU counter (at least 4 scrape intervals).")
_COMPRESS = typer.Option(False, "--compress/--no-compress", help="Ask for gzip answers (for a slow link; costs CPU on both ends).")
_CONCURRENCY = typer.Option(2, "--concurrency", min=1, help="Requests in flight at once.")


def register(app: typer.Typer) -> None:
    app.command("dcgm")(dcgm)
    app.command("usage")(usage)
    app.command("serving")(serving)


@handle_errors
def dcgm(
    ctx: typer.Context,
    cluster: str = _CLUSTER,
    prometheus: str | None = _URL,
    from_file: Path | None = _FROM_FILE,
    at: str | None = _AT,
    start: str | None = _START,
    end: str | None = _END,
    step: str = _STEP,
    max_points_per_series: int = _MAX_SERIES_PTS,
    max_points_per_request: int = _MAX_REQ_PTS,
    max_window: str = _MAX_WINDOW,
    timeout: str = _TIMEOUT,
    retries: int = _RETRIES,
    concurrency: int = _CONCURRENCY,
    compress: bool = _COMPRESS,
) -> None:
    """DCGM GPU samples (gpu_samples) from Prometheus, or from a saved exporter scrape with --from-file."""
    settings = settings_of(ctx)
    if from_file is not None:
        if prometheus:
            raise ConfigError("pass either --from-file or --prometheus, not both")
        at_ts = parse_time(at, option="--at") if at else None
        summary = ingest_exposition_file(from_file, settings.lake_dir, cluster, at=at_ts, quality=settings)
        _print(summary.as_dict())
        return
    _run_api(settings, "dcgm", cluster, prometheus, start, end, step,
             max_points_per_series, max_points_per_request, max_window, timeout, retries, concurrency, compress)


@handle_errors
def usage(
    ctx: typer.Context,
    cluster: str = _CLUSTER,
    prometheus: str | None = _URL,
    start: str | None = _START,
    end: str | None = _END,
    step: str = _STEP,
    max_points_per_series: int = _MAX_SERIES_PTS,
    max_points_per_request: int = _MAX_REQ_PTS,
    max_window: str = _MAX_WINDOW,
    timeout: str = _TIMEOUT,
    retries: int = _RETRIES,
    concurrency: int = _CONCURRENCY,
    compress: bool = _COMPRESS,
    rate_window: str = _RATE_WINDOW,
) -> None:
    """Container CPU cores and memory working set (container_usage) from cAdvisor metrics in Prometheus."""
    parse_duration(rate_window, option="--rate-window")  # fail early, with the option's name
    settings = UsageSettings(rate_window=rate_window)
    _run_api(settings_of(ctx), "usage", cluster, prometheus, start, end, step,
             max_points_per_series, max_points_per_request, max_window, timeout, retries, concurrency, compress,
             loaders=[CpuCores(settings), MemoryWorkingSet(settings)])


@handle_errors
def serving(
    ctx: typer.Context,
    cluster: str = _CLUSTER,
    prometheus: str | None = _URL,
    start: str | None = _START,
    end: str | None = _END,
    step: str = _STEP,
    max_points_per_series: int = _MAX_SERIES_PTS,
    max_points_per_request: int = _MAX_REQ_PTS,
    max_window: str = _MAX_WINDOW,
    timeout: str = _TIMEOUT,
    retries: int = _RETRIES,
    concurrency: int = _CONCURRENCY,
    compress: bool = _COMPRESS,
) -> None:
    """Request and token counters of serving pods (serving_requests): vLLM by default, any server
    through the `serving_promql:` setting (a PromQL per counter: requests, prompt_tokens, generation_tokens)."""
    settings = settings_of(ctx)
    cfg = ServingSettings(promql=dict(config_section(settings, "serving_promql")))
    unknown = sorted(set(cfg.promql) - {"requests", "prompt_tokens", "generation_tokens"})
    if unknown:
        raise ConfigError(f"serving_promql: unknown counter(s) {unknown}; use requests, prompt_tokens, generation_tokens")
    _run_api(settings, "serving", cluster, prometheus, start, end, step,
             max_points_per_series, max_points_per_request, max_window, timeout, retries, concurrency, compress,
             loaders=[ServingRequests(cfg), ServingPromptTokens(cfg), ServingGenerationTokens(cfg)])


def _run_api(settings: Settings, source: str, cluster: str, url: str | None, start: str | None, end: str | None,
             step: str, max_points_per_series: int, max_points_per_request: int, max_window: str,
             timeout: str, retries: int, concurrency: int, compress: bool, loaders: list[MetricLoader] | None = None) -> None:
    url = url or settings.prometheus_url
    if not url:
        raise ConfigError("no Prometheus URL: pass --prometheus, set GPUFINOPS_PROMETHEUS_URL or prometheus_url in the config file")
    step_s = parse_duration(step, option="--step")
    limits = SplitLimits(max_points_per_series=max_points_per_series, max_points_per_request=max_points_per_request,
                         max_window_s=parse_duration(max_window, option="--max-window"))
    end_ts = parse_time(end, option="--end") if end else align_down(datetime.now(UTC) - timedelta(seconds=_END_LAG_S), step_s)
    start_ts = resolve_start(settings.lake_dir, cluster, source, parse_time(start, option="--start") if start else None)
    if start_ts >= end_ts:
        if start is not None:
            raise InputError(f"--start {start_ts.isoformat()} is not before --end {end_ts.isoformat()}")
        # Resuming from a watermark that is already at --end (a schedule firing twice): a no-op.
        _print({"source": source, "cluster": cluster, "start": start_ts.isoformat(), "end": end_ts.isoformat(),
                "windows": 0, "rows": 0, "note": "up to date: the watermark is not before --end"})
        return
    total = len(time_windows(start_ts, end_ts, step_s, limits))
    token = settings.prometheus_token.get_secret_value() if settings.prometheus_token else None
    with PromClient(url, token=token, timeout_s=parse_duration(timeout, option="--timeout"), retries=retries, compress=compress) as client, \
            Progress(TextColumn(f"{source} {cluster}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                     console=console, transient=True, disable=not console.is_terminal) as progress:
        task = progress.add_task("windows", total=total)
        summary = ingest_range(client, settings.lake_dir, source, cluster, start_ts, end_ts, step_s=step_s, quality=settings,
                               limits=limits, concurrency=concurrency, loaders=loaders, on_window=lambda _w, _n: progress.advance(task))
    _print(summary.as_dict())


def _print(summary: dict[str, object]) -> None:
    # One JSON object on stdout: readable by people and by the CronJob's log pipeline alike.
    console.print_json(json.dumps(summary, default=str))
