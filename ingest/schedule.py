"""``gpufinops ingest all``: every configured source once, for schedulers (CronJob, cron, Airflow).

Sources come from the ``sources:`` list of the settings (see :class:`gpufinops.settings.SourceConfig`).
One failing source does not stop the others; the caller gets one outcome per source and decides
the exit status. Each source writes through the lake writer, so a re-run is idempotent.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from gpufinops.errors import ConfigError, GpufinopsError
from gpufinops.settings import Settings, SourceConfig

__all__ = ["SourceOutcome", "run_all_once", "RUNNERS"]


@dataclass
class SourceOutcome:
    kind: str
    cluster: str | None
    ok: bool
    detail: str
    seconds: float


def _need(src: SourceConfig, field: str) -> str:
    value = getattr(src, field)
    if value in (None, ""):
        raise ConfigError(f"sources[{src.kind}, cluster={src.cluster}]: setting {field!r} is required")
    return str(value)


def _k8s(settings: Settings, src: SourceConfig) -> str:
    from ingest.k8s.live import ingest_once
    from ingest.k8s.settings import K8sSettings
    from ingest.lake import LakeWriter

    k8s = K8sSettings.load(settings.config, kubeconfig=src.kubeconfig, context=src.context)
    snap, record = ingest_once(LakeWriter(settings.lake_dir, quality=settings), _need(src, "cluster"), k8s)
    return f"snapshot rows {record.rows}"


def _prometheus(source: str) -> Callable[[Settings, SourceConfig], str]:
    def run(settings: Settings, src: SourceConfig) -> str:
        from ingest.prometheus.api_ingest import ingest_range
        from ingest.prometheus.client import PromClient
        from ingest.prometheus.plan import align_down
        from ingest.prometheus.watermark import read_watermark

        cluster = _need(src, "cluster")
        url = src.prometheus_url or settings.prometheus_url
        if not url:
            raise ConfigError(f"sources[{source}, cluster={cluster}]: no prometheus_url (nor a global prometheus_url)")
        # End a little behind now so the newest samples have been scraped everywhere.
        end = align_down(datetime.now(UTC) - timedelta(seconds=2 * src.step_s), src.step_s)
        start = None if read_watermark(settings.lake_dir, cluster, source) else end - timedelta(seconds=src.lookback_s)
        token = settings.prometheus_token.get_secret_value() if settings.prometheus_token else None
        with PromClient(url, token=token) as client:
            summary = ingest_range(client, settings.lake_dir, source, cluster, start, end, step_s=src.step_s,
                                   quality=settings)
        d = summary.as_dict()
        return f"{d.get('rows', 0)} rows in {d.get('windows', 0)} window(s)"

    return run


def _prices(settings: Settings, src: SourceConfig) -> str:
    from ingest.lake import LakeWriter
    from ingest.prices.land import ingest_price_file

    result = ingest_price_file(settings.lake_dir, _need(src, "file"), _need(src, "format"),
                               writer=LakeWriter(settings.lake_dir, quality=settings), currency=settings.currency)
    return f"{sum(r.rows for r in result.runs)} price rows"


def _billing(settings: Settings, src: SourceConfig) -> str:
    from ingest.focus.land import ingest_focus_files
    from ingest.lake import LakeWriter

    result = ingest_focus_files(settings.lake_dir, [_need(src, "file")],
                                writer=LakeWriter(settings.lake_dir, quality=settings), currency=settings.currency)
    return f"{len(result.files)} FOCUS file(s)"


def _changes(settings: Settings, src: SourceConfig) -> str:
    from gpufinops.appdb import open_app_db
    from ingest.applied_changes import export_applied_changes

    result = export_applied_changes(open_app_db(settings.effective_app_db_url), settings.lake_dir, quality=settings)
    return f"{sum(result.rows.values())} applied change(s)"


RUNNERS: dict[str, Callable[[Settings, SourceConfig], str]] = {
    "k8s": _k8s,
    "dcgm": _prometheus("dcgm"),
    "usage": _prometheus("usage"),
    "prices": _prices,
    "billing": _billing,
    "changes": _changes,
}


def run_all_once(settings: Settings) -> list[SourceOutcome]:
    if not settings.sources:
        raise ConfigError("no sources configured: add a `sources:` list to the config file (see docs/operations.md)")
    outcomes = []
    for src in settings.sources:
        t0 = time.perf_counter()
        try:
            detail, ok = RUNNERS[src.kind](settings, src), True
        except GpufinopsError as exc:
            detail, ok = f"{type(exc).__name__}: {exc}", False
        outcomes.append(SourceOutcome(src.kind, src.cluster, ok, detail, round(time.perf_counter() - t0, 2)))
    return outcomes
