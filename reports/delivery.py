"""Delivering a report: e-mail over SMTP (HTML, inline charts, CSV attachments) and chat webhooks.

Channels are small classes in a registry; each ``send`` either delivers or raises a project error
(transient for network trouble, so a CronJob retry makes sense; terminal for bad settings).
"""

from __future__ import annotations

import smtplib
import ssl
from dataclasses import dataclass
from email.message import EmailMessage
from typing import Protocol

import httpx

from gpufinops.errors import ConfigError, TransientError
from reports.build import Report
from reports.config import ReportSettings, SmtpSettings, webhook_for

__all__ = ["Channel", "EmailChannel", "WebhookChannel", "channels_for", "email_message", "webhook_payload"]


class Channel(Protocol):
    name: str

    def send(self, report: Report) -> str: ...


def email_message(report: Report, sender: str, recipients: list[str]) -> EmailMessage:
    """multipart/mixed: (alternative: text, related(html, PNGs by Content-ID)), then one CSV per table."""
    msg = EmailMessage()
    msg["Subject"] = report.title + (f" — {len(report.alerts)} budget alert(s)" if report.alerts else "")
    msg["From"] = sender
    msg["To"] = ", ".join(recipients)
    msg.set_content(report.summary().replace("*", ""))
    msg.add_alternative(report.html(inline_images=False), subtype="html")
    html_part = msg.get_body(("html",))
    assert isinstance(html_part, EmailMessage)
    for cid, png in report.images.items():
        html_part.add_related(png, maintype="image", subtype="png", cid=f"<{cid}>", filename=f"{cid}.png")
    for name, data in report.csvs().items():
        msg.add_attachment(data, maintype="text", subtype="csv", filename=name)
    return msg


@dataclass
class EmailChannel:
    smtp: SmtpSettings
    recipients: list[str]
    name: str = "email"

    def send(self, report: Report) -> str:
        msg = email_message(report, self.smtp.sender, self.recipients)
        try:
            cls = smtplib.SMTP_SSL if self.smtp.ssl else smtplib.SMTP
            with cls(self.smtp.host, self.smtp.port, timeout=self.smtp.timeout_s) as client:
                if self.smtp.starttls and not self.smtp.ssl:
                    client.starttls(context=ssl.create_default_context())
                if self.smtp.username:
                    password = self.smtp.password.get_secret_value() if self.smtp.password else ""
                    client.login(self.smtp.username, password)
                refused = client.send_message(msg)
        except smtplib.SMTPAuthenticationError as exc:
            raise ConfigError(f"SMTP {self.smtp.host}:{self.smtp.port} refused the login for {self.smtp.username}: {exc}") from exc
        except (OSError, smtplib.SMTPException) as exc:
            raise TransientError(f"SMTP {self.smtp.host}:{self.smtp.port}: {exc}") from exc
        delivered = [r for r in self.recipients if r not in refused]
        return f"e-mailed to {', '.join(delivered)}"


def webhook_payload(report: Report) -> dict:
    """Slack-style incoming-webhook JSON: ``text`` for any chat tool, ``blocks`` for Slack."""
    fields = [
        {"type": "mrkdwn", "text": f"*{k.replace('_usd', '').replace('_', ' ')}*\n"
                                   + (f"${v:,.2f}" if k.endswith("_usd") else f"{v:,.1f}")}
        for k, v in report.totals.items()
    ]
    blocks: list[dict] = [
        {"type": "header", "text": {"type": "plain_text", "text": report.title[:150]}},
        {"type": "section", "fields": fields[:10]},
    ]
    for alert in report.alerts:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": f":warning: *Budget alert* — {alert.text}"}})
    if report.dashboard_url:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": f"<{report.dashboard_url}|Open the dashboards>"}})
    return {"text": report.summary(), "blocks": blocks}


@dataclass
class WebhookChannel:
    url: str
    name: str = "webhook"
    timeout_s: float = 15.0

    def send(self, report: Report) -> str:
        try:
            resp = httpx.post(self.url, json=webhook_payload(report), timeout=self.timeout_s)
        except httpx.HTTPError as exc:
            raise TransientError(f"webhook {self._where}: {exc}") from exc
        if resp.status_code >= 500 or resp.status_code == 429:
            raise TransientError(f"webhook {self._where} answered {resp.status_code}")
        if resp.status_code >= 400:
            raise ConfigError(f"webhook {self._where} answered {resp.status_code}: {resp.text[:200]}")
        return f"posted to webhook {self._where}"

    @property
    def _where(self) -> str:
        # the URL path of a Slack webhook is its secret; name only the host
        return httpx.URL(self.url).host or "?"


def channels_for(report: Report, rs: ReportSettings) -> list[Channel]:
    """The channels configured for the report's audience (none configured is a ConfigError on --send)."""
    found: list[Channel] = []
    recipients = rs.recipients.get(report.audience, [])
    if recipients:
        if rs.smtp is None:
            raise ConfigError(f"reports.recipients names {report.audience!r} but reports.smtp is not set")
        found.append(EmailChannel(rs.smtp, recipients))
    url = webhook_for(rs, report.audience)
    if url:
        found.append(WebhookChannel(url))
    if not found:
        raise ConfigError(
            f"nothing to send {report.audience!r} to: set reports.recipients[{report.audience!r}] (with reports.smtp) "
            f"or reports.webhooks[{report.audience!r}] in the config file"
        )
    return found
