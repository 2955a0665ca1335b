"""DCGM and cAdvisor ingest from a real Prometheus server holding back-filled data."""

from __future__ import annotations

import json
import math
from datetime import timedelta

import httpx
import pyarrow as pa
import pytest
from promserver import (
    END,
    POINTS,
    STEP,
    T0,
    USAGE_EXPECTED,
    expected_gpu_rows,
    prometheus_server_fixture,  # noqa: F401  (registers the "prometheus_server" fixture)
    read_lake,
)
from typer.testing import CliRunner

from cli.main import app
from gpufinops.errors import InputError, TransientError
from ingest.lake import list_runs
from ingest.prometheus import PromClient, SplitLimits, ingest_range, read_watermark
from ingest.prometheus.queries import GpuUtil

_IDENTITY = ("hostname", "gpu", "uuid", "model_name", "mig_profile", "mig_instance", "namespace", "pod", "container")
_FIELDS = ("gr_engine_active", "gpu_util", "fb_used_mib", "fb_free_mib", "power_w", "tensor_active")


def _rows(table: pa.Table) -> dict[tuple, dict[str, float | None]]:
    out: dict[tuple, dict[str, float | None]] = {}
    for r in table.to_pylist():
        key = (*(r[c] for c in _IDENTITY), r["ts"])
        assert key not in out, f"duplicate row {key}"
        out[key] = {f: r[f] for f in _FIELDS}
    return out


def _assert_same(got: dict, want: dict) -> None:
    assert set(got) == set(want)
    for key, fields in want.items():
        for f, v in fields.items():
            g = got[key][f]
            if v is None:
                assert g is None, (key, f, g)
            else:
                assert g == pytest.approx(v, rel=1e-6), (key, f, g, v)  # landed as float32


def test_dcgm_rows_equal_what_was_written(prometheus_server, tmp_path):
    with PromClient(prometheus_server.url) as client:
        summary = ingest_range(client, tmp_path, "dcgm", "c1", T0, END)
    got = _rows(read_lake(tmp_path, "gpu_samples"))
    _assert_same(got, expected_gpu_rows())
    # Both label generations, MIG and the exported_* relabel land with the right identity.
    idents = {k[:9] for k in got}
    assert ("node-a", 0, "GPU-a0", "NVIDIA A100-SXM4-80GB", None, None, "ml", "train-0", "trainer") in idents
    assert ("node-c", 0, "GPU-c0", "NVIDIA A100-SXM4-80GB", "1g.10gb", 8, "notebooks", "nb-2", "jupyter") in idents
    assert ("node-d", 0, "GPU-d0", "NVIDIA H100 80GB HBM3", None, None, "batch", "batch-7", "worker") in idents
    assert ("node-d", 1, "GPU-d1", "NVIDIA H100 80GB HBM3", None, None, None, None, None) in idents
    # The NaN and the series without a gpu label are dropped and counted.
    assert summary.counts.nan_dropped == 1
    assert summary.counts.skipped_series == 1 and "node-e" in summary.counts.skipped_examples[0]
    assert summary.counts.rows == len(got) == 9 * POINTS
    assert read_watermark(tmp_path, "c1", "dcgm") == END


def test_split_by_time_and_series_gives_identical_rows(prometheus_server, tmp_path):
    with PromClient(prometheus_server.url) as whole:
        ingest_range(whole, tmp_path / "whole", "dcgm", "c1", T0, END, concurrency=1)
    limits = SplitLimits(max_points_per_series=50, max_points_per_request=150, max_window_s=86_400)
    with PromClient(prometheus_server.url) as split:
        summary = ingest_range(split, tmp_path / "split", "dcgm", "c1", T0, END, limits=limits, concurrency=3)
    ranges = [e for e in split.log.entries if e["path"] == "/api/v1/query_range"]
    assert summary.windows == math.ceil(POINTS / 50)
    assert len(ranges) > 6 * summary.windows  # more than one request per field and window: split by series
    assert all((float(e["end"]) - float(e["start"])) / STEP + 1 <= 50 for e in ranges)
    assert any('hostname=~"' in e["query"] for e in ranges) and any('Hostname=~"' in e["query"] for e in ranges)
    _assert_same(_rows(read_lake(tmp_path / "split", "gpu_samples")), _rows(read_lake(tmp_path / "whole", "gpu_samples")))


def test_watermark_resume_fetches_only_new_data_and_rerun_is_idempotent(prometheus_server, tmp_path):
    middle = T0 + timedelta(hours=2)
    with PromClient(prometheus_server.url) as client:
        ingest_range(client, tmp_path, "dcgm", "c1", T0, middle)
        assert read_watermark(tmp_path, "c1", "dcgm") == middle
        n_before = client.log.count
        second = ingest_range(client, tmp_path, "dcgm", "c1", None, END)  # start from the watermark
        fetched = client.log.entries[n_before:]
    assert second.start == middle
    assert all(float(e["start"]) >= middle.timestamp() for e in fetched if e["path"] == "/api/v1/query_range")
    _assert_same(_rows(read_lake(tmp_path, "gpu_samples")), expected_gpu_rows())
    # Re-running an already ingested window replaces it: same rows, no duplicates.
    with PromClient(prometheus_server.url) as client:
        ingest_range(client, tmp_path, "dcgm", "c1", T0, middle)
    _assert_same(_rows(read_lake(tmp_path, "gpu_samples")), expected_gpu_rows())
    assert read_watermark(tmp_path, "c1", "dcgm") == END  # never moves backwards


class _FailAfter(httpx.BaseTransport):
    """Passes the first ``ok`` requests through to the server, then answers 400 (a terminal error)."""

    def __init__(self, ok: int):
        self.ok, self.calls = ok, 0
        self._real = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        if self.calls > self.ok:
            return httpx.Response(400, json={"status": "error", "errorType": "bad_data", "error": "injected"})
        return self._real.handle_request(request)


def test_a_failure_keeps_committed_windows_and_resumes_from_them(prometheus_server, tmp_path):
    hour = SplitLimits(max_window_s=3600)
    per_window = 1 + 6  # the series pre-query and one range query per field
    with PromClient(prometheus_server.url, transport=_FailAfter(per_window + 3)) as client, \
            pytest.raises(InputError, match="injected"):
        ingest_range(client, tmp_path, "dcgm", "c1", T0, END, limits=hour, concurrency=1)
    first_hour = T0 + timedelta(hours=1)
    assert read_watermark(tmp_path, "c1", "dcgm") == first_hour
    assert [r.status for r in list_runs(tmp_path)] == ["committed", "failed"]
    _assert_same(_rows(read_lake(tmp_path, "gpu_samples")), expected_gpu_rows(T0, first_hour))
    with PromClient(prometheus_server.url) as client:
        resumed = ingest_range(client, tmp_path, "dcgm", "c1", None, END, limits=hour)
    assert resumed.start == first_hour and resumed.windows == 2
    _assert_same(_rows(read_lake(tmp_path, "gpu_samples")), expected_gpu_rows())


def test_container_usage(prometheus_server, tmp_path):
    with PromClient(prometheus_server.url) as client:
        summary = ingest_range(client, tmp_path, "usage", "c1", T0, END)
    table = read_lake(tmp_path, "container_usage")
    assert summary.counts.rows == table.num_rows
    keys = {(r["namespace"], r["pod"], r["container"]) for r in table.to_pylist()}
    assert keys == set(USAGE_EXPECTED)  # POD and the cgroup aggregate (container="") are filtered out
    settled = T0 + timedelta(minutes=5)  # rate() over [5m] needs a full window of samples
    for r in table.to_pylist():
        cpu, mem = USAGE_EXPECTED[(r["namespace"], r["pod"], r["container"])]
        assert r["memory_working_set_bytes"] == mem
        if r["ts"] >= settled:
            assert r["cpu_cores"] == pytest.approx(cpu, rel=1e-5)


def test_bad_query_is_a_terminal_error_naming_the_query(prometheus_server, tmp_path):
    class Broken(GpuUtil):
        def promql(self, matchers: str = "", *, step_s: float = 60.0) -> str:
            return "rate(DCGM_FI_DEV_GPU_UTIL{[5m])"

    with PromClient(prometheus_server.url) as client, pytest.raises(InputError, match=r"DCGM_FI_DEV_GPU_UTIL\{\[5m\]"):
        ingest_range(client, tmp_path, "dcgm", "c1", T0, END, loaders=[Broken()])
    assert read_lake(tmp_path, "gpu_samples").num_rows == 0  # nothing partial
    assert read_watermark(tmp_path, "c1", "dcgm") is None
    assert [r.status for r in list_runs(tmp_path)] == ["failed"]


class _FlakyTransport(httpx.BaseTransport):
    """Answers the first ``failures`` requests with the given status, then passes through to the server."""

    def __init__(self, status: int, failures: int):
        self.status, self.failures, self.calls = status, failures, 0
        self._real = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        if self.calls <= self.failures:
            return httpx.Response(self.status, json={"status": "error", "errorType": "unavailable", "error": "busy"})
        return self._real.handle_request(request)


@pytest.mark.parametrize("status", [429, 503])
def test_transient_errors_are_retried_with_backoff(prometheus_server, status):
    sleeps: list[float] = []
    transport = _FlakyTransport(status, failures=2)
    with PromClient(prometheus_server.url, transport=transport, sleep=sleeps.append, backoff_s=0.5) as client:
        result = client.query_range("DCGM_FI_DEV_FB_USED", T0, T0 + timedelta(minutes=4), STEP)
    assert len(result) == 9 and all(len(s["values"]) == 5 for s in result)
    assert sleeps == [0.5, 1.0] and client.log.retries == 2


def test_persistent_5xx_becomes_transient_error(prometheus_server):
    transport = _FlakyTransport(502, failures=100)
    with PromClient(prometheus_server.url, transport=transport, sleep=lambda s: None, retries=3) as client, \
            pytest.raises(TransientError, match="failed 4 times.*HTTP 502"):
        client.query("up", T0)


def test_cli_ingest_dcgm_and_usage_resume(prometheus_server, tmp_path):
    runner = CliRunner()
    home = ["--home", str(tmp_path)]
    common = ["--prometheus", prometheus_server.url, "--cluster", "c1"]
    res = runner.invoke(app, [*home, "ingest", "dcgm", *common, "--start", T0.isoformat(), "--end", "2025-03-01T02:00:00Z",
                              "--compress"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["rows"] == 9 * 120
    res = runner.invoke(app, [*home, "ingest", "dcgm", *common, "--end", END.isoformat()])  # resumes
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["start"] == "2025-03-01T02:00:00+00:00" and summary["rows"] == 9 * 60 and summary["nan_dropped"] == 0
    res = runner.invoke(app, [*home, "ingest", "dcgm", *common, "--end", END.isoformat()])  # already up to date
    assert res.exit_code == 0 and json.loads(res.stdout)["windows"] == 0
    res = runner.invoke(app, [*home, "ingest", "usage", *common, "--end", END.isoformat()])
    assert res.exit_code == 2 and "--start" in res.output  # no watermark for usage yet
    res = runner.invoke(app, [*home, "ingest", "usage", *common, "--start", str(int(T0.timestamp())), "--rate-window", "5 min"])
    assert res.exit_code == 2 and "--rate-window" in res.output
    res = runner.invoke(app, [*home, "ingest", "usage", *common, "--start", str(int(T0.timestamp())), "--end", END.isoformat(),
                              "--step", "5m", "--rate-window", "10m"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["rows"] == len(USAGE_EXPECTED) * (POINTS // 5)
