"""Budget breach notices: each breach goes out once per day, audience and channel, never twice.

A breach (``gpufinops.views.budgets.Breach``: a team's or a registered workload's budget exceeded by its
run rate or its month-end forecast on one day) is sent to the breached team's audience
(``team:<team>``) and to ``finance``, over the channels configured for each under ``reports:`` (SMTP
recipients, a webhook). What was sent is kept in the app DB table ``budget_notifications``, keyed by
(breach id = scope|basis|day, audience, channel): a re-run sends only what no earlier run sent.

Claim, then send: the row is inserted (status ``claimed``) before the message goes out and marked
``sent`` after; a send that fails removes its claims, so the next run retries. Two runs at once cannot
both claim a breach (the primary key), so a notice is never sent twice; a run killed between its claim
and the send leaves a ``claimed`` row, which is not retried (listed by the API as such).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import pandas as pd
from sqlalchemy import Engine, delete, select, update
from sqlalchemy.exc import IntegrityError

from gpufinops.appdb.schema import budget_notifications
from gpufinops.errors import ConfigError
from gpufinops.views.budgets import Breach
from reports.build import Report
from reports.config import ReportSettings, webhook_for
from reports.delivery import Channel, EmailChannel, WebhookChannel
from reports.period import Period

__all__ = ["Delivery", "audiences_of", "notice", "send_breach_notices", "sent_notifications"]


@dataclass(frozen=True)
class Delivery:
    audience: str
    channel: str
    breach_ids: tuple[str, ...]
    result: str  # what the channel said, or why nothing was sent


def audiences_of(breach: Breach) -> list[str]:
    return ["finance"] + ([f"team:{breach.team}"] if breach.team else [])


def _channels(rs: ReportSettings, audience: str) -> list[Channel]:
    found: list[Channel] = []
    recipients = rs.recipients.get(audience, [])
    if recipients:
        if rs.smtp is None:
            raise ConfigError(f"reports.recipients names {audience!r} but reports.smtp is not set")
        found.append(EmailChannel(rs.smtp, recipients))
    url = webhook_for(rs, audience)
    if url:
        found.append(WebhookChannel(url))
    return found


def notice(audience: str, found: Sequence[Breach], dashboard_url: str | None = None) -> Report:
    """The message for one audience: the breaches as alerts, a table and its CSV."""
    day = max(b.day for b in found)
    table = pd.DataFrame([{k: v for k, v in b.to_dict().items() if k != "text"} for b in found])
    rows = "".join(f'<div class="alert"><b>Budget breach</b> — {html.escape(b.text)}</div>' for b in found)
    period = Period("monthly", day.replace(day=1), day + timedelta(days=1))
    title = f"Budget breach — {audience} — {day:%d %b %Y}: {len(found)} budget(s) exceeded"
    return Report(audience, period, title, {}, {"budget_breaches": table}, {}, list(found),
                  [f"<h2>Budgets exceeded on {day}</h2>" + rows], dashboard_url)


def sent_notifications(engine: Engine, day: date | None = None) -> pd.DataFrame:
    q = select(budget_notifications)
    if day is not None:
        q = q.where(budget_notifications.c.day == day.isoformat())
    with engine.connect() as conn:
        return pd.DataFrame([dict(r) for r in conn.execute(q).mappings()],
                            columns=[c.name for c in budget_notifications.columns])


def _claim(engine: Engine, audience: str, channel: str, found: Sequence[Breach], now: datetime) -> list[Breach]:
    """Insert a claim per breach not yet claimed for (audience, channel); the ones this run claimed."""
    claimed = []
    for b in found:
        try:
            with engine.begin() as conn:
                conn.execute(budget_notifications.insert().values(
                    breach_id=b.id, audience=audience, channel=channel, day=b.day.isoformat(), scope_id=b.scope_id,
                    basis=b.basis, status="claimed", detail=b.to_dict(), claimed_at=now, sent_at=None))
        except IntegrityError:
            continue  # sent (or being sent) by an earlier or concurrent run
        claimed.append(b)
    return claimed


def send_breach_notices(engine: Engine, found: Sequence[Breach], rs: ReportSettings, *,
                        clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> list[Delivery]:
    """Send every breach not sent before to its audiences' channels; what happened, per channel."""
    by_audience: dict[str, list[Breach]] = {}
    for b in found:
        for audience in audiences_of(b):
            by_audience.setdefault(audience, []).append(b)
    plan = {audience: _channels(rs, audience) for audience in sorted(by_audience)}
    if found and not any(plan.values()):
        raise ConfigError("nothing to send budget breaches to: set reports.recipients / reports.webhooks for "
                          f"{' or '.join(repr(a) for a in sorted(by_audience))} in the config file")
    out: list[Delivery] = []
    for audience, channels in plan.items():
        for channel in channels:
            mine = _claim(engine, audience, channel.name, by_audience[audience], clock())
            if not mine:
                out.append(Delivery(audience, channel.name, (), "already sent"))
                continue
            ids = [b.id for b in mine]
            key = (budget_notifications.c.audience == audience) & (budget_notifications.c.channel == channel.name) \
                & budget_notifications.c.breach_id.in_(ids)
            try:
                result = channel.send(notice(audience, mine, rs.dashboard_url))
            except BaseException:
                with engine.begin() as conn:
                    conn.execute(delete(budget_notifications).where(key))
                raise
            with engine.begin() as conn:
                conn.execute(update(budget_notifications).where(key).values(status="sent", sent_at=clock()))
            out.append(Delivery(audience, channel.name, tuple(ids), result))
    return out
