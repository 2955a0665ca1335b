"""The CLI imports only the invoked command's module (cli/main.py): its table of contents must name,
for every top-level command, the module that registers it, and the command line must be read right."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import typer

from cli.main import _COMMAND_MODULES, _modules_for, invoked_command

_ROOT = Path(__file__).resolve().parents[1]


def _registered(module: str) -> set[str]:
    app = typer.Typer()
    importlib.import_module(module).register(app)
    names = {c.name for c in app.registered_commands} | {g.name for g in app.registered_groups}
    return {n for n in names if n}


def test_every_command_module_registers_the_name_it_is_listed_under():
    for name, module in _COMMAND_MODULES.items():
        assert _registered(module) == {name}, (name, module)


def test_the_invoked_command_is_read_past_the_root_options():
    assert invoked_command(["--home", "x", "build", "--full"]) == "build"
    assert invoked_command(["--config", "c.yaml", "--debug", "serve", "builder"]) == "serve"
    assert invoked_command(["--home=x", "ingest", "k8s"]) == "ingest"
    assert invoked_command(["--help"]) is None
    assert invoked_command([]) is None


def test_only_the_cli_itself_imports_one_module():
    assert _modules_for(["build"], "/usr/bin/gpufinops") == ["cli.commands.build"]
    assert _modules_for(["build"], "/x/cli/main.py") == ["cli.commands.build"]
    # another program importing cli.main (pytest, an unknown command, --help) gets every command
    assert _modules_for(["build"], "/x/pytest") == list(_COMMAND_MODULES.values())
    assert _modules_for(["nosuch"], "/usr/bin/gpufinops") == list(_COMMAND_MODULES.values())
    assert _modules_for(["--help"], "/usr/bin/gpufinops") == list(_COMMAND_MODULES.values())


def test_a_command_line_still_lists_every_command_and_runs_one():
    helped = subprocess.run([sys.executable, "-m", "cli.main", "--help"], cwd=_ROOT, capture_output=True, text=True)
    assert helped.returncode == 0
    for name in _COMMAND_MODULES:
        assert name in helped.stdout, name
    one = subprocess.run([sys.executable, "-m", "cli.main", "serve", "--help"], cwd=_ROOT, capture_output=True, text=True)
    assert one.returncode == 0 and "builder" in one.stdout and "dashboard" in one.stdout
