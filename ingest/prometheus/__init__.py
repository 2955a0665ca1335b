"""Prometheus-backed ingest: DCGM GPU samples and cAdvisor container usage.

Two ways in: the HTTP API (:func:`ingest_range`, split by time and series, resumable from a
watermark) and a saved ``/metrics`` scrape (:func:`ingest_exposition_file`).
"""

from ingest.prometheus.api_ingest import IngestSummary, ingest_range, resolve_start
from ingest.prometheus.client import PromClient
from ingest.prometheus.file_ingest import FILE_SOURCE, FileIngestSummary, ingest_exposition_file
from ingest.prometheus.plan import SplitLimits, Window, time_windows
from ingest.prometheus.queries import LOADERS, SOURCES, MetricLoader, get_source, register_loader
from ingest.prometheus.watermark import read_watermark, watermark_path, write_watermark

__all__ = [
    "FILE_SOURCE",
    "FileIngestSummary",
    "IngestSummary",
    "LOADERS",
    "MetricLoader",
    "PromClient",
    "SOURCES",
    "SplitLimits",
    "Window",
    "get_source",
    "ingest_exposition_file",
    "ingest_range",
    "read_watermark",
    "register_loader",
    "resolve_start",
    "time_windows",
    "watermark_path",
    "write_watermark",
]
