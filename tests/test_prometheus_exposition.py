"""Saved dcgm-exporter scrapes: text format with and without timestamps, OpenMetrics, bad lines."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from promserver import read_lake
from typer.testing import CliRunner

from cli.main import app
from gpufinops.errors import InputError
from ingest.lake import list_runs
from ingest.prometheus import FILE_SOURCE, ingest_exposition_file
from ingest.prometheus.exposition import ExpositionStats, parse_exposition

FIXTURES = Path(__file__).parent / "fixtures" / "prometheus"
AT = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def _by_gpu(lake: Path) -> dict[tuple, dict]:
    return {(r["hostname"], r["gpu"], r["mig_instance"], r["ts"]): r for r in read_lake(lake, "gpu_samples").to_pylist()}


def test_text_without_timestamps_uses_at(tmp_path):
    s = ingest_exposition_file(FIXTURES / "dcgm_text_no_ts.prom", tmp_path, "c1", at=AT)
    rows = _by_gpu(tmp_path)
    assert set(rows) == {("gpu-node-1", 0, None, AT), ("gpu-node-1", 1, None, AT)}
    busy = rows[("gpu-node-1", 0, None, AT)]
    assert (busy["namespace"], busy["pod"], busy["container"]) == ("infer", "llm-0", "server")
    assert busy["gpu_util"] == 87 and busy["fb_used_mib"] == 78897 and busy["fb_free_mib"] == 2107
    assert busy["power_w"] == pytest.approx(612.383) and busy["gr_engine_active"] == pytest.approx(0.912345)
    idle = rows[("gpu-node-1", 1, None, AT)]
    assert idle["pod"] is None and idle["tensor_active"] is None  # the NaN: dropped, counted
    assert (s.unlabeled_skipped, s.other_metrics_skipped, s.counts.nan_dropped) == (2, 2, 1)
    assert not s.openmetrics and s.window_start == AT


def test_text_without_timestamps_defaults_to_mtime(tmp_path):
    f = tmp_path / "scrape.prom"
    f.write_bytes((FIXTURES / "dcgm_text_no_ts.prom").read_bytes())
    mtime = datetime(2025, 5, 6, 7, 8, 9, tzinfo=UTC)
    os.utime(f, (mtime.timestamp(), mtime.timestamp()))
    ingest_exposition_file(f, tmp_path / "lake", "c1")
    assert {k[3] for k in _by_gpu(tmp_path / "lake")} == {mtime}


def test_text_with_millisecond_timestamps_old_labels(tmp_path):
    s = ingest_exposition_file(FIXTURES / "dcgm_text_ts.prom", tmp_path, "c1", at=AT)  # --at is ignored
    rows = sorted(read_lake(tmp_path, "gpu_samples").to_pylist(), key=lambda r: r["ts"])
    assert [r["ts"] for r in rows] == [datetime(2025, 3, 1, 0, 0, tzinfo=UTC), datetime(2025, 3, 1, 0, 1, tzinfo=UTC)]
    assert [(r["gpu_util"], r["fb_used_mib"]) for r in rows] == [(55, 30100), (65, 30200)]
    r = rows[0]
    assert (r["hostname"], r["model_name"], r["namespace"], r["pod"], r["container"]) == (
        "old-node-7", "Tesla V100-SXM2-32GB", "research", "resnet-0", "train")
    assert s.unlabeled_skipped == 1


def test_openmetrics_seconds_mig_and_reingest_is_idempotent(tmp_path):
    for _ in range(2):
        s = ingest_exposition_file(FIXTURES / "dcgm_openmetrics.om", tmp_path, "c1")
    assert s.openmetrics and s.unlabeled_skipped == 1 and s.counts.nan_dropped == 1
    rows = read_lake(tmp_path, "gpu_samples").to_pylist()
    assert len(rows) == 2
    ts = datetime(2025, 3, 1, 0, 0, 0, 500000, tzinfo=UTC)
    by = {r["mig_instance"]: r for r in rows}
    assert by[9]["ts"] == ts and by[9]["mig_profile"] == "1g.10gb" and by[9]["pod"] == "jupyter-ann"
    assert by[9]["gr_engine_active"] == 0.125 and by[9]["fb_used_mib"] == 4096
    assert by[2]["mig_profile"] == "3g.40gb" and by[2]["fb_used_mib"] is None
    assert {r.source for r in list_runs(tmp_path)} == {FILE_SOURCE}


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ('DCGM_FI_DEV_GPU_UTIL{gpu="0",hostname="h" 5', "malformed label set"),
        ('DCGM_FI_DEV_GPU_UTIL{gpu="0"} five', "not a number"),
        ('DCGM_FI_DEV_GPU_UTIL{gpu="0"} 5 12.5', "integer milliseconds"),
        ('DCGM_FI_DEV_GPU_UTIL{gpu="0",gpu="1"} 5', "repeated"),
        ("{gpu=\"0\"} 5", "no metric name"),
    ],
)
def test_malformed_line_names_file_and_line(tmp_path, line, why):
    f = tmp_path / "bad.prom"
    good = 'DCGM_FI_DEV_GPU_UTIL{gpu="1",hostname="h"} 3'
    f.write_text(f"# HELP DCGM_FI_DEV_GPU_UTIL util\n# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n{good}\nup 1\n{line}\n{good}\n")
    with pytest.raises(InputError, match=rf"bad\.prom:5: .*{why}"):
        ingest_exposition_file(f, tmp_path / "lake", "c1", at=AT)
    assert read_lake(tmp_path / "lake", "gpu_samples").num_rows == 0  # nothing partial


def test_content_after_eof_is_an_error(tmp_path):
    f = tmp_path / "x.om"
    f.write_text('# TYPE a gauge\na{gpu="0"} 1 1\n# EOF\na{gpu="0"} 2 2\n')
    with pytest.raises(InputError, match=r"x\.om:4: content after '# EOF'"):
        list(parse_exposition(f))


def test_parser_escapes_exemplars_and_special_values(tmp_path):
    f = tmp_path / "y.om"
    f.write_text('# TYPE a counter\na_total{path="C:\\\\x",msg="say \\"hi\\"\\n"} +Inf 10 # {trace_id="abc"} 1.0 9\n'
                 'a_total{k="v"} -Inf\n# EOF\n')
    stats = ExpositionStats()
    samples = list(parse_exposition(f, stats))
    assert samples[0].labels == {"path": "C:\\x", "msg": 'say "hi"\n'}
    assert samples[0].value == float("inf") and samples[0].ts_s == 10.0 and samples[1].value == float("-inf")
    assert stats.openmetrics and stats.samples == 2


def test_cli_from_file(tmp_path):
    res = CliRunner().invoke(app, ["--home", str(tmp_path), "ingest", "dcgm", "--from-file",
                                   str(FIXTURES / "dcgm_text_no_ts.prom"), "--cluster", "c9", "--at", "2025-03-01T12:00:00Z"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["rows"] == 2 and out["unlabeled_skipped"] == 2 and out["format"] == "text"
    res = CliRunner().invoke(app, ["--home", str(tmp_path), "ingest", "dcgm", "--from-file", str(tmp_path / "missing.prom"),
                                   "--cluster", "c9"])
    assert res.exit_code == 2 and "missing.prom" in res.output


def test_openmetrics_writer_round_trips_through_the_parser(tmp_path):
    from testsupport.prometheus_server import Family, write_openmetrics

    series = {"gpu": "0", "pod": 'we"ird\\name'}
    fams = [Family("DCGM_FI_DEV_GPU_UTIL", [(series, 1740787200.0, 12.5), (series, 1740787260.0, float("nan"))]),
            Family("x_total", [({"k": "v"}, 1740787200.25, 3.0)], type="counter")]
    f = tmp_path / "w.om"
    with f.open("w") as fh:
        assert write_openmetrics(fh, fams) == 3
    got = list(parse_exposition(f))
    assert [(s.name, s.labels, s.ts_s) for s in got] == [
        ("DCGM_FI_DEV_GPU_UTIL", series, 1740787200.0), ("DCGM_FI_DEV_GPU_UTIL", series, 1740787260.0),
        ("x_total", {"k": "v"}, 1740787200.25)]
    assert got[0].value == 12.5 and got[1].value != got[1].value  # NaN survives as NaN
