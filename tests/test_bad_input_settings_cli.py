"""Bad settings (config file and environment) and bad CLI use: one `error:` line naming the setting
or option and where it came from, no traceback (unless --debug), the lake and app DB unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest
from badinput import DUMP, assert_refused, cli, snapshot

YAML_CASES = [
    ("typo-did-you-mean", "dq_on_failur: quarantine\n", ["unknown setting `dq_on_failur`", "did you mean `dq_on_failure`?"]),
    ("nested-typo", "cost:\n  gpu_wieght: 3\n", ["unknown setting `cost.gpu_wieght`", "did you mean `cost.gpu_weight`?"]),
    ("negative-interval", "snapshot_interval_s: -60\n", ["setting `snapshot_interval_s`", "greater than 0", "-60"]),
    ("negative-weight", "cost:\n  gpu_weight: -1\n", ["setting `cost.gpu_weight`", "greater than or equal to 0"]),
    ("negative-overhead", "cost:\n  fixed_overhead_usd_per_hour:\n    '*': -0.5\n",
     ["setting `cost.fixed_overhead_usd_per_hour.*`", "greater than or equal to 0"]),
    ("nan-weight", "cost:\n  vcpu_weight: .nan\n", ["setting `cost.vcpu_weight`", "finite"]),
    ("bad-choice", "dq_on_failure: sometimes\n", ["setting `dq_on_failure`", "'fail' or 'quarantine'"]),
    ("zero-price-limit", "limits:\n  max_price_per_hour: 0\n", ["setting `limits.max_price_per_hour`", "greater than 0"]),
    ("negative-rate", "currency:\n  rates:\n    EUR: -1\n", ["setting `currency.rates.EUR`", "greater than 0"]),
    ("source-step-zero", "sources:\n  - kind: dcgm\n    step_s: 0\n", ["setting `sources.0.step_s`", "greater than 0"]),
    ("not-yaml", "cost: [unclosed\n", ["is not valid YAML"]),
    ("top-level-list", "- a\n- b\n", ["must hold a mapping at the top level"]),
]


@pytest.mark.parametrize(("text", "names"), [c[1:] for c in YAML_CASES], ids=[c[0] for c in YAML_CASES])
def test_bad_config_file_is_refused(bad_home: Path, tmp_path: Path, text: str, names: list[str]) -> None:
    cfg = tmp_path / "gpufinops.yaml"
    cfg.write_text(text)
    before = snapshot(bad_home)
    res = cli(bad_home, "--config", cfg, "ingest", "k8s", "--cluster", "c1", "--from-dump", DUMP,
              "--at", "2026-11-01T06:00:00Z")
    assert_refused(res, before, bad_home, "gpufinops.yaml", *names)


ENV_CASES = [
    ("env-nan", {"GPUFINOPS_COST__GPU_WEIGHT": "nan"}, ["environment variable GPUFINOPS_COST__GPU_WEIGHT", "finite"]),
    ("env-negative-interval", {"GPUFINOPS_SNAPSHOT_INTERVAL_S": "-5"},
     ["environment variable GPUFINOPS_SNAPSHOT_INTERVAL_S", "greater than 0"]),
    ("env-unknown-nested", {"GPUFINOPS_COST__GPU_WIEGHT": "3"},
     ["unknown setting `cost.gpu_wieght`", "did you mean `cost.gpu_weight`?"]),
]


@pytest.mark.parametrize(("env", "names"), [c[1:] for c in ENV_CASES], ids=[c[0] for c in ENV_CASES])
def test_bad_environment_setting_is_refused(bad_home: Path, env: dict[str, str], names: list[str]) -> None:
    before = snapshot(bad_home)
    res = cli(bad_home, "ingest", "k8s", "--cluster", "c1", "--from-dump", DUMP, "--at", "2026-11-01T06:00:00Z", env=env)
    assert_refused(res, before, bad_home, *names)


@pytest.mark.parametrize("command", [["ingest", "k8s", "--cluster", "c1", "--from-dump", str(DUMP)], ["db", "upgrade"],
                                     ["check"]], ids=["ingest", "db-upgrade", "check"])
def test_home_that_is_a_file_is_one_error_line(bad_home: Path, tmp_path: Path, command: list[str]) -> None:
    not_a_folder = tmp_path / "home-file"
    not_a_folder.write_text("x")
    before = snapshot(bad_home)
    res = cli(None, *command, env={"GPUFINOPS_HOME": str(not_a_folder)})
    assert_refused(res, before, bad_home, "environment variable GPUFINOPS_HOME", "home-file", "is a file")


RECOMMEND_CASES = [
    ("window-nan", ["--window-days", "nan"], {}, ["--window-days nan", "> 0"]),
    ("window-negative", ["--window-days", "-5"], {}, ["--window-days -5.0", "> 0"]),
    ("window-inf", ["--window-days", "inf"], {}, ["--window-days inf", "> 0"]),
    ("window-env", [], {"GPUFINOPS_RECOMMEND_WINDOW_DAYS": "-1"}, ["environment variable GPUFINOPS_RECOMMEND_WINDOW_DAYS", "> 0"]),
]


@pytest.mark.parametrize(("args", "env", "names"), [c[1:] for c in RECOMMEND_CASES], ids=[c[0] for c in RECOMMEND_CASES])
def test_bad_recommend_window_is_refused(bad_home: Path, args: list[str], env: dict[str, str], names: list[str]) -> None:
    before = snapshot(bad_home)
    res = cli(bad_home, "recommend", "--dry-run", *args, env=env)
    assert_refused(res, before, bad_home, *names)


CLI_CASES = [
    ("billing-without-file", ["ingest", "billing"], ["--focus FILE"]),
    ("prices-without-format", ["ingest", "prices", "--file", "x.csv"], ["--format is required"]),
    ("check-unknown", ["check", "--only", "nope"], ["unknown lake check(s) ['nope']"]),
    ("two-dumps-one-at", ["ingest", "k8s", "--cluster", "c1", "--from-dump", str(DUMP), "--from-dump",
                          str(Path(__file__).parent / "fixtures" / "kube_replay" / "pods.json"), "--at", "2026-11-01T06:00:00Z"],
     ["--at names one snapshot time"]),
    ("empty-cluster-name", ["ingest", "k8s", "--cluster", "", "--from-dump", str(DUMP), "--at", "2026-11-01T06:00:00Z"],
     ["empty name"]),
]


@pytest.mark.parametrize(("args", "names"), [c[1:] for c in CLI_CASES], ids=[c[0] for c in CLI_CASES])
def test_bad_cli_use_is_one_error_line(bad_home: Path, args: list[str], names: list[str]) -> None:
    before = snapshot(bad_home)
    res = cli(bad_home, *args)
    assert_refused(res, before, bad_home, *names)


def test_debug_adds_the_traceback(bad_home: Path) -> None:
    """The same error with --debug: the traceback first, then the same one line."""
    res = cli(bad_home, "--debug", "ingest", "k8s", "--cluster", "c1", "--from-dump", DUMP, "--at", "9999-12-31T23:59:59Z")
    assert res.exit_code == 2 and "Traceback (most recent call last)" in res.output
    assert res.output.strip().splitlines()[-1].startswith("error: --at")
