"""``gpufinops serve dashboard [--port 8501]``: the Streamlit dashboards; ``gpufinops serve api
[--host 127.0.0.1] [--port 8000] [--demo]``: the REST API under uvicorn, with these settings.

Both listen on ``$PORT`` when it is set and ``--port`` is not given (container platforms set it).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from cli.context import console, handle_errors, settings_of
from gpufinops.settings import Settings

__all__ = ["register", "dashboard_command", "DASHBOARD_PAGES"]

_APP = Path(__file__).resolve().parents[2] / "dashboards" / "app.py"
DASHBOARD_PAGES = ("finance", "team", "platform")


def dashboard_command(
    settings: Settings, *, port: int, address: str, demo: bool
) -> tuple[list[str], dict[str, str]]:
    """The ``streamlit run`` argv and environment; settings travel as ``GPUFINOPS_*`` variables."""
    argv = [
        sys.executable, "-m", "streamlit", "run", str(_APP),
        "--server.port", str(port),
        "--server.address", address,
        "--server.headless", "true",
        "--server.fileWatcherType", "none",
        "--browser.gatherUsageStats", "false",
        "--client.toolbarMode", "viewer",
    ]
    env = dict(os.environ)
    env["GPUFINOPS_HOME"] = str(Path(settings.home).resolve())
    if settings.config:
        env["GPUFINOPS_CONFIG"] = str(Path(settings.config).resolve())
    if settings.app_db_url:
        env["GPUFINOPS_APP_DB_URL"] = settings.app_db_url
    env["GPUFINOPS_DASHBOARD_DEMO"] = "1" if demo else "0"
    return argv, env


def register(app: typer.Typer) -> None:
    serve_app = typer.Typer(help="Serve the dashboards or the REST API.", no_args_is_help=True)

    @serve_app.command("dashboard")
    @handle_errors
    def dashboard(
        ctx: typer.Context,
        port: Annotated[int, typer.Option("--port", envvar="PORT", help="Port to listen on ($PORT when set).")] = 8501,
        address: Annotated[str, typer.Option("--address", "--host", help="Interface to bind (0.0.0.0 in a container).")] = "localhost",
        demo: Annotated[bool, typer.Option(
            "--demo", envvar="GPUFINOPS_DASHBOARD_DEMO",
            help="Demo mode: no auth proxy; the viewer picks a role in the sidebar.",
        )] = False,
    ) -> None:
        """Serve the finance, team-lead and platform dashboards (Streamlit)."""
        settings = settings_of(ctx)
        argv, env = dashboard_command(settings, port=port, address=address, demo=demo)
        host = "localhost" if address in ("0.0.0.0", "::") else address
        console.print(f"Dashboards on http://{host}:{port}/  (warehouse {settings.warehouse_path})")
        for page in DASHBOARD_PAGES:
            console.print(f"  {page:<9} http://{host}:{port}/{page}")
        if demo:
            console.print("  demo mode: pick a role in the sidebar, or open e.g. "
                          f"http://{host}:{port}/team?role=team-lead:<team>")
        raise typer.Exit(subprocess.call(argv, env=env))

    @serve_app.command("api")
    @handle_errors
    def api(
        ctx: typer.Context,
        host: Annotated[str, typer.Option("--host", help="Interface to bind (0.0.0.0 in a container).")] = "127.0.0.1",
        port: Annotated[int, typer.Option("--port", envvar="PORT", help="Port to listen on ($PORT when set).")] = 8000,
        demo: Annotated[bool, typer.Option(
            "--demo", envvar="GPUFINOPS_API_DEMO",
            help="Demo mode: write one token per role to the tokens file and print them.",
        )] = False,
    ) -> None:
        """Serve the REST API (OpenAPI docs at /docs)."""
        import uvicorn

        from api.app import create_app
        from api.config import load_api_settings

        settings = settings_of(ctx)
        api_settings = load_api_settings(settings)
        if demo:
            from api.demo_tokens import demo_teams, write_demo_tokens

            tokens = write_demo_tokens(api_settings.tokens_path(settings), demo_teams(settings.warehouse_path))
            console.print("demo API tokens (also in the tokens file as hashes); use `Authorization: Bearer <token>`:")
            for name, (roles, token) in tokens.items():
                console.print(f"  {name:<22} {', '.join(roles):<22} {token}", highlight=False, soft_wrap=True)
        shown = "localhost" if host in ("0.0.0.0", "::") else host
        console.print(f"API on http://{shown}:{port}/  (docs /docs, health /healthz, metrics /metrics)")
        uvicorn.run(create_app(settings, api_settings=api_settings), host=host, port=port, log_level="info")

    @serve_app.command("builder")
    @handle_errors
    def builder(ctx: typer.Context) -> None:
        """A long-lived build worker for this home: `gpufinops build` hands it the build over the Unix
        socket <home>/build-worker.sock, and it runs it with dbt already imported and the project already
        parsed (the hourly build's fixed cost). Stops on Ctrl-C / SIGTERM."""
        import signal

        from transform.worker import serve

        settings = settings_of(ctx)
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
        console.print(f"build worker for {Path(settings.home).resolve()}: parsing the dbt project ...")
        try:
            serve(settings, ready=lambda path: console.print(f"build worker ready on {path} (pid {os.getpid()})"))
        except KeyboardInterrupt:
            console.print("build worker stopped")

    app.add_typer(serve_app, name="serve")
