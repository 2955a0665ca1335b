"""Report delivery settings, from the ``reports:`` section of the config file.

Secrets come from the environment: ``GPUFINOPS_SMTP_PASSWORD`` and, per audience,
``GPUFINOPS_WEBHOOK_URL`` (finance) / ``GPUFINOPS_WEBHOOK_URL_<TEAM>`` are read when the file names none.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, Field, SecretStr, ValidationError

from gpufinops.errors import ConfigError
from gpufinops.settings import Settings, config_section

__all__ = ["SmtpSettings", "ReportSettings", "load_report_settings", "webhook_for"]


class SmtpSettings(BaseModel):
    host: str = "localhost"
    port: int = 25
    sender: str = "gpufinops@localhost"
    username: str | None = None
    password: SecretStr | None = None
    starttls: bool = False
    ssl: bool = False
    timeout_s: float = 30.0


class ReportSettings(BaseModel):
    smtp: SmtpSettings | None = None
    # audience ("finance", "team:<name>") -> e-mail addresses / one Slack-style webhook URL
    recipients: dict[str, list[str]] = Field(default_factory=dict)
    webhooks: dict[str, SecretStr] = Field(default_factory=dict)
    out_dir: Path | None = None  # default: <home>/reports
    dashboard_url: str | None = None  # linked from the report when set


def load_report_settings(settings: Settings) -> ReportSettings:
    data = config_section(settings, "reports")
    try:
        rs = ReportSettings(**data)
    except ValidationError as exc:
        raise ConfigError(f"invalid `reports` settings: {exc}") from exc
    password = os.environ.get("GPUFINOPS_SMTP_PASSWORD")
    if rs.smtp is not None and password and rs.smtp.password is None:
        rs.smtp.password = SecretStr(password)
    return rs


def webhook_for(rs: ReportSettings, audience: str) -> str | None:
    if audience in rs.webhooks:
        return rs.webhooks[audience].get_secret_value()
    suffix = "" if audience == "finance" else "_" + audience.split(":", 1)[-1].upper().replace("-", "_")
    return os.environ.get("GPUFINOPS_WEBHOOK_URL" + suffix)

