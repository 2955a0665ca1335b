"""Delivery against real local servers: an aiosmtpd SMTP server and an HTTP webhook receiver."""

from __future__ import annotations

import importlib.util
import json
import socket
import threading
from email import message_from_bytes, policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import typer
from aiosmtpd.controller import Controller
from typer.testing import CliRunner

from gpufinops.errors import ConfigError, TransientError
from gpufinops.settings import load_settings


def _support():
    spec = importlib.util.spec_from_file_location("dash_support", Path(__file__).parent / "fixtures/dashboards/support.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


support = _support()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Inbox:
    def __init__(self) -> None:
        self.messages: list[tuple[str, list[str], bytes]] = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's hook name)
        self.messages.append((envelope.mail_from, list(envelope.rcpt_tos), envelope.content))
        return "250 OK"


@pytest.fixture
def smtp():
    inbox = _Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=_free_port())
    controller.start()
    yield controller.port, inbox
    controller.stop()


@pytest.fixture
def webhook():
    received: list[dict] = []
    status = {"code": 200}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append({"path": self.path, "type": self.headers["Content-Type"], "json": json.loads(body)})
            self.send_response(status["code"])
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):  # keep test output quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/services/T000/B000/secret", received, status
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def home(tmp_path_factory, mini_fleet) -> Path:
    home = tmp_path_factory.mktemp("home")
    support.build_warehouse(home, mini_fleet)
    (home / "budgets.csv").write_text("team,monthly_budget_usd\nalpha,5000\n")
    return home


def _cli(home: Path, config: Path):
    from cli.commands import report

    app = typer.Typer()

    @app.callback()
    def _root(ctx: typer.Context) -> None:
        ctx.obj = load_settings(home=home, config=config)

    report.register(app)
    return app


def _config(home: Path, body: str) -> Path:
    cfg = home / "cfg.yaml"
    cfg.write_text(f"dashboards:\n  budgets_file: {home / 'budgets.csv'}\n" + body)
    return cfg


def test_send_by_email_and_webhook(home, smtp, webhook, tmp_path) -> None:
    port, inbox = smtp
    url, received, _ = webhook
    cfg = _config(home, f"""
reports:
  smtp: {{host: 127.0.0.1, port: {port}, sender: reports@gpufinops.test}}
  recipients: {{finance: [cfo@example.com, finops@example.com]}}
  webhooks: {{finance: "{url}"}}
  dashboard_url: http://dash.example/finance
""")
    result = CliRunner().invoke(_cli(home, cfg), ["report", "--period", "weekly", "--audience", "finance", "--send",
                                                   "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "e-mailed to cfo@example.com, finops@example.com" in result.output
    assert "posted to webhook 127.0.0.1" in result.output and "secret" not in result.output

    [(sender, rcpts, raw)] = inbox.messages
    assert sender == "reports@gpufinops.test" and rcpts == ["cfo@example.com", "finops@example.com"]
    msg = message_from_bytes(raw, policy=policy.default)
    assert msg["Subject"].startswith("GPU cost report — finance — week 27 Oct")
    html = msg.get_body(("html",)).get_content()
    assert "$1,449.60" in html and "http://dash.example/finance" in html
    attachments = {p.get_filename(): p.get_content() for p in msg.iter_attachments()}
    assert "chargeback_by_team.csv" in attachments
    assert "alpha" in attachments["chargeback_by_team.csv"]
    images = [p for p in msg.walk() if p.get_content_type() == "image/png"]
    assert {p["Content-ID"] for p in images} == {"<cost_lines>", "<spend_by_team>"}

    [hook] = received
    assert hook["path"] == "/services/T000/B000/secret" and hook["type"] == "application/json"
    assert "Budget alert" in json.dumps(hook["json"]["blocks"])  # alpha's forecast crosses 5,000
    assert "$1,449.60" in hook["json"]["text"]


def test_webhook_errors_are_classified(home, webhook) -> None:
    import duckdb

    from dashboards.config import DashboardSettings
    from reports.build import build_report
    from reports.delivery import WebhookChannel

    url, _, status = webhook
    con = duckdb.connect(str(home / "warehouse.duckdb"), read_only=True)
    rep = build_report(con, load_settings(home=home), DashboardSettings(), "weekly", "team:alpha")
    con.close()
    status["code"] = 503
    with pytest.raises(TransientError):
        WebhookChannel(url).send(rep)
    status["code"] = 404
    with pytest.raises(ConfigError, match="404"):
        WebhookChannel(url).send(rep)
    with pytest.raises(TransientError):
        WebhookChannel(f"http://127.0.0.1:{_free_port()}/x", timeout_s=2).send(rep)


def test_send_without_channels_names_the_setting(home, tmp_path) -> None:
    cfg = _config(home, "reports: {}\n")
    result = CliRunner().invoke(_cli(home, cfg), ["report", "--period", "weekly", "--audience", "team:alpha", "--send",
                                                   "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "reports.recipients['team:alpha']" in result.output
