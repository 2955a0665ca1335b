"""Bad DCGM scrapes (``ingest dcgm --from-file``) and bad Prometheus ingest options: refused with
the file and line (or the option) named, the lake and app DB unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest
from badinput import DCGM, assert_refused, cli, snapshot

_LABELS = 'gpu="0",UUID="GPU-5f1c",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-1"'


def _scrape(*lines: str) -> str:
    return "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n" + "\n".join(lines) + "\n"


FILE_CASES = [
    ("malformed-labels", _scrape('DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID=} 5'), ["bad.prom:2", "label"]),
    ("value-not-a-number", _scrape(f"DCGM_FI_DEV_GPU_UTIL{{{_LABELS}}} lots"), ["bad.prom:2", "'lots' is not a number"]),
    ("timestamp-not-integer-ms", _scrape(f"DCGM_FI_DEV_GPU_UTIL{{{_LABELS}}} 5 17.5"), ["bad.prom:2", "integer milliseconds"]),
    ("timestamp-past-9999", _scrape(f"DCGM_FI_DEV_GPU_UTIL{{{_LABELS}}} 5 253402300800000"), ["bad.prom:2", "out of range"]),
    ("timestamp-1e300", _scrape(f"DCGM_FI_DEV_GPU_UTIL{{{_LABELS}}} 5 1e300"), ["bad.prom:2", "1e300"]),
    ("samples-dated-1970", _scrape(f"DCGM_FI_DEV_GPU_UTIL{{{_LABELS}}} 5 1000"), ["gpu_samples.ts", "1970-01-01", "bad.prom"]),
    ("util-above-100", _scrape(f"DCGM_FI_DEV_GPU_UTIL{{{_LABELS}}} 150 1793505600000"), ["gpu_samples.gpu_util", "150", "bad.prom"]),
    ("fb-used-1e300", "# TYPE DCGM_FI_DEV_FB_USED gauge\n" + f"DCGM_FI_DEV_FB_USED{{{_LABELS}}} 1e300 1793505600000\n",
     ["gpu_samples.fb_used_mib", "bad.prom"]),
    ("unknown-mig-profile", _scrape(f'DCGM_FI_DEV_GPU_UTIL{{{_LABELS},GPU_I_PROFILE="9g.99gb",GPU_I_ID="1"}} 5 1793505600000'),
     ["gpu_samples.mig_profile", "9g.99gb", "bad.prom"]),
    ("repeated-label", _scrape('DCGM_FI_DEV_GPU_UTIL{gpu="0",gpu="1"} 5'), ["bad.prom:2", "'gpu' repeated"]),
    ("content-after-eof", "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n" + f"DCGM_FI_DEV_GPU_UTIL{{{_LABELS}}} 5 1793505600\n# EOF\nmore\n",
     ["bad.prom:4", "after '# EOF'"]),
]


@pytest.mark.parametrize(("text", "names"), [c[1:] for c in FILE_CASES], ids=[c[0] for c in FILE_CASES])
def test_bad_scrape_is_refused(bad_home: Path, tmp_path: Path, text: str, names: list[str]) -> None:
    bad = tmp_path / "bad.prom"
    bad.write_text(text)
    before = snapshot(bad_home)
    res = cli(bad_home, "ingest", "dcgm", "--cluster", "c1", "--from-file", bad)
    assert_refused(res, before, bad_home, *names)


def test_missing_scrape_is_named(bad_home: Path, tmp_path: Path) -> None:
    before = snapshot(bad_home)
    res = cli(bad_home, "ingest", "dcgm", "--cluster", "c1", "--from-file", tmp_path / "gone.prom")
    assert_refused(res, before, bad_home, "gone.prom", "does not exist")


OPTION_CASES = [
    ("at-year-9999", ["--from-file", str(DCGM), "--at", "9999-12-31T23:59:59Z"], ["--at", "out of range"]),
    ("at-unix-1e300", ["--from-file", str(DCGM), "--at", "1e300"], ["--at", "out of range"]),
    ("start-nan", ["--prometheus", "http://127.0.0.1:9", "--start", "nan", "--end", "2026-11-01T05:00:00Z"], ["--start", "'nan'"]),
    ("step-zero", ["--prometheus", "http://127.0.0.1:9", "--start", "2026-11-01T04:00:00Z", "--end", "2026-11-01T05:00:00Z",
                   "--step", "0"], ["--step", "positive"]),
    ("file-and-url", ["--from-file", str(DCGM), "--prometheus", "http://127.0.0.1:9"], ["--from-file", "--prometheus"]),
]


@pytest.mark.parametrize(("args", "names"), [c[1:] for c in OPTION_CASES], ids=[c[0] for c in OPTION_CASES])
def test_bad_prometheus_option_is_refused(bad_home: Path, args: list[str], names: list[str]) -> None:
    before = snapshot(bad_home)
    res = cli(bad_home, "ingest", "dcgm", "--cluster", "c1", *args)
    assert_refused(res, before, bad_home, *names)
