"""`gpufinops serve dashboard` registered on a fresh typer app (the real server runs in the browser test)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from typer.testing import CliRunner

from cli.commands import serve
from gpufinops.settings import load_settings


def test_dashboard_command_passes_settings_by_env(tmp_path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("{}\n")
    argv, env = serve.dashboard_command(load_settings(home=tmp_path, config=cfg), port=8600, address="0.0.0.0", demo=True)
    assert argv[:4] == [sys.executable, "-m", "streamlit", "run"]
    assert Path(argv[4]).name == "app.py" and Path(argv[4]).exists()
    assert argv[argv.index("--server.port") + 1] == "8600" and argv[argv.index("--server.address") + 1] == "0.0.0.0"
    assert env["GPUFINOPS_HOME"] == str(tmp_path.resolve()) and env["GPUFINOPS_CONFIG"] == str(cfg.resolve())
    assert env["GPUFINOPS_DASHBOARD_DEMO"] == "1"


def test_serve_group_registers_dashboard(monkeypatch, tmp_path) -> None:
    app = typer.Typer()

    @app.callback()
    def _root(ctx: typer.Context) -> None:
        ctx.obj = load_settings(home=tmp_path)

    serve.register(app)
    calls = []
    monkeypatch.setattr(serve.subprocess, "call", lambda argv, env: calls.append((argv, env)) or 0)
    result = CliRunner().invoke(app, ["serve", "dashboard", "--port", "8777", "--host", "0.0.0.0"])
    assert result.exit_code == 0, result.output
    assert "http://localhost:8777/finance" in result.output and "http://localhost:8777/platform" in result.output
    [(argv, env)] = calls
    assert "8777" in argv and env["GPUFINOPS_DASHBOARD_DEMO"] == "0"
