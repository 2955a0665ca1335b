"""Settings precedence (kwargs > env > YAML > defaults) and the CLI's global options."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from gpufinops.errors import ConfigError
from gpufinops.settings import load_settings


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("GPUFINOPS_HOME", "GPUFINOPS_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    s = load_settings()
    assert s.home == Path("./var")
    assert s.lake_dir == Path("./var/lake")
    assert s.cost.gpu_weight == 9.0 and s.cost.vcpu_weight == 0.9 and s.cost.gib_weight == 0.1
    assert s.cost.split_method == "residual" and s.cost.residual_floor_fraction == 0.1
    assert "kube-system" in s.cost.shared_namespaces


def test_split_method_is_residual_or_weights_and_reaches_dbt(monkeypatch: pytest.MonkeyPatch) -> None:
    from transform.runner import dbt_vars

    monkeypatch.setenv("GPUFINOPS_COST__SPLIT_METHOD", "weights")
    monkeypatch.setenv("GPUFINOPS_COST__RESIDUAL_FLOOR_FRACTION", "0.2")
    variables = dbt_vars(load_settings())
    assert variables["split_method"] == "weights" and variables["residual_floor_fraction"] == 0.2
    monkeypatch.setenv("GPUFINOPS_COST__SPLIT_METHOD", "equal")
    with pytest.raises(ConfigError, match="split_method"):
        load_settings()


def test_yaml_then_env_then_kwargs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "gpufinops.yaml"
    cfg.write_text("home: /from/yaml\nsnapshot_interval_s: 30\ncost:\n  gpu_weight: 7\n  shared_cost_method: even\n")
    monkeypatch.setenv("GPUFINOPS_CONFIG", str(cfg))
    s = load_settings()
    assert s.home == Path("/from/yaml") and s.snapshot_interval_s == 30
    assert s.cost.gpu_weight == 7 and s.cost.shared_cost_method == "even"
    assert s.cost.vcpu_weight == 0.9  # untouched nested defaults survive a partial YAML section
    monkeypatch.setenv("GPUFINOPS_SNAPSHOT_INTERVAL_S", "15")
    monkeypatch.setenv("GPUFINOPS_COST__GPU_WEIGHT", "5")
    s = load_settings()
    assert s.snapshot_interval_s == 15 and s.cost.gpu_weight == 5
    s = load_settings(home=tmp_path)
    assert s.home == tmp_path


def test_bad_config_names_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match="nope.yaml"):
        load_settings(config=missing)
    bad = tmp_path / "bad.yaml"
    bad.write_text("cost:\n  shared_cost_method: sometimes\n")
    with pytest.raises(ConfigError, match="shared_cost_method"):
        load_settings(config=bad)


def test_cli_reports_bad_config_without_traceback(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["--config", str(tmp_path / "absent.yaml"), "ingest", "--help"])
    assert result.exit_code == 2
    assert "absent.yaml" in result.output
    assert "Traceback" not in result.output
