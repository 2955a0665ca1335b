"""The append-only, hash-chained audit log of every change transition (and pause/resume).

Each row's ``hash`` is sha256 over the canonical JSON of its content (seq, at, actor, action,
change_id, from_status, to_status, reason, details) and ``prev_hash``, the previous row's hash (the
first row's is 64 zeros). ``audit_head`` holds the last seq and hash, moved in the same transaction.
Appends are serialised (PostgreSQL: a transaction-scoped advisory lock; SQLite: the single writer,
BEGIN IMMEDIATE via ``gpufinops.appdb.begin_write``). DB triggers refuse UPDATE/DELETE on the log.

``verify`` recomputes the chain and names the first broken seq: an edited row (hash mismatch), a
deleted or re-ordered row (seq gap / prev_hash mismatch), deleted last rows (head ahead of the log).
Its limit: whoever can rewrite the whole chain *and* the head goes unnoticed; anchor the printed head
hash somewhere else (a ticket, a log shipper) to close that.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Engine, RowMapping, select, text

from changes.model import AuditEntry
from gpufinops.appdb import as_utc
from gpufinops.appdb.schema import GENESIS_HASH, audit_head, audit_log
from gpufinops.errors import Conflict

__all__ = ["append", "verify", "AuditReport", "entry_hash", "row_to_entry", "jsonable", "AUDIT_LOCK_KEY"]

AUDIT_LOCK_KEY = 7_301_220_002


def jsonable(value: Any) -> Any:
    """What a JSON column stores: datetimes as ISO strings, tuples as lists, sets sorted, NaN as null."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted(jsonable(v) for v in value)
    if isinstance(value, datetime):
        return value.isoformat()
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    if isinstance(value, float) and value != value:
        return None
    return value


def _at_text(at: datetime) -> str:
    return at.astimezone(UTC).isoformat(timespec="microseconds")


def entry_hash(*, seq: int, at: datetime, actor: str, action: str, change_id: str | None,
               from_status: str | None, to_status: str | None, reason: str | None,
               details: Any, prev_hash: str) -> str:
    body = {
        "seq": seq, "at": _at_text(at), "actor": actor, "action": action, "change_id": change_id,
        "from_status": from_status, "to_status": to_status, "reason": reason, "details": details,
        "prev_hash": prev_hash,
    }
    canon = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canon.encode()).hexdigest()


def row_to_entry(row: RowMapping) -> AuditEntry:
    at = as_utc(row["at"])
    assert at is not None
    return AuditEntry(seq=row["seq"], at=at, actor=row["actor"], action=row["action"], change_id=row["change_id"],
                      from_status=row["from_status"], to_status=row["to_status"], reason=row["reason"],
                      details=row["details"], prev_hash=row["prev_hash"], hash=row["hash"])


def append(conn: Connection, *, actor: str, action: str, change_id: str | None, from_status: str | None,
           to_status: str | None, reason: str | None, details: dict[str, Any] | None,
           at: datetime) -> AuditEntry:
    """Append one entry inside the caller's transaction and move the head."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("select pg_advisory_xact_lock(:k)"), {"k": AUDIT_LOCK_KEY})
    head = conn.execute(select(audit_head.c.seq, audit_head.c.hash).where(audit_head.c.id == 1)).one()
    seq = int(head.seq) + 1
    at = at.astimezone(UTC)
    # what the JSON column gives back is what gets hashed
    stored_details = json.loads(json.dumps(jsonable(details))) if details is not None else None
    h = entry_hash(seq=seq, at=at, actor=actor, action=action, change_id=change_id, from_status=from_status,
                   to_status=to_status, reason=reason, details=stored_details, prev_hash=head.hash)
    conn.execute(audit_log.insert().values(
        seq=seq, at=at, actor=actor, action=action, change_id=change_id, from_status=from_status,
        to_status=to_status, reason=reason, details=stored_details, prev_hash=head.hash, hash=h))
    moved = conn.execute(audit_head.update().where(audit_head.c.id == 1, audit_head.c.seq == head.seq)
                         .values(seq=seq, hash=h))
    if moved.rowcount != 1:
        raise Conflict("audit_head moved during an append; retry the request")
    return AuditEntry(seq=seq, at=at, actor=actor, action=action, change_id=change_id, from_status=from_status,
                      to_status=to_status, reason=reason, details=stored_details, prev_hash=head.hash, hash=h)


@dataclass
class AuditReport:
    ok: bool
    rows: int
    problems: list[str] = field(default_factory=list)
    first_bad_seq: int | None = None
    head_seq: int | None = None
    head_hash: str | None = None


def verify(engine: Engine | Connection) -> AuditReport:
    """Recompute the chain; problems in seq order, each naming the seq at fault."""
    if isinstance(engine, Engine):
        with engine.connect() as conn:
            return verify(conn)
    conn = engine
    head = conn.execute(select(audit_head.c.seq, audit_head.c.hash).where(audit_head.c.id == 1)).first()
    problems: list[tuple[int, str]] = []
    prev_hash, prev_seq, rows = GENESIS_HASH, 0, 0
    for row in conn.execute(select(audit_log).order_by(audit_log.c.seq)).mappings():
        rows += 1
        seq = int(row["seq"])
        if seq != prev_seq + 1:
            missing = f"seq {prev_seq + 1}" if seq == prev_seq + 2 else f"seq {prev_seq + 1}..{seq - 1}"
            problems.append((prev_seq + 1, f"seq {prev_seq + 1}: missing ({missing} deleted; the log jumps "
                                           f"from seq {prev_seq} to seq {seq})"))
        if row["prev_hash"] != prev_hash:
            problems.append((seq, f"seq {seq}: prev_hash does not match the hash of the row before it "
                                  f"(seq {prev_seq}): a row was deleted, re-ordered or rewritten"))
        at = as_utc(row["at"])
        assert at is not None
        recomputed = entry_hash(seq=seq, at=at, actor=row["actor"], action=row["action"],
                                change_id=row["change_id"], from_status=row["from_status"],
                                to_status=row["to_status"], reason=row["reason"], details=row["details"],
                                prev_hash=row["prev_hash"])
        if recomputed != row["hash"]:
            problems.append((seq, f"seq {seq}: contents do not match its hash (the row was edited)"))
        prev_hash, prev_seq = row["hash"], seq
    head_seq = int(head.seq) if head is not None else None
    head_hash = head.hash if head is not None else None
    if head is None:
        problems.append((prev_seq + 1, "audit_head: the head row is missing"))
    elif head_seq != prev_seq or head_hash != prev_hash:
        if head_seq is not None and head_seq > prev_seq:
            problems.append((prev_seq + 1, f"seq {prev_seq + 1}: missing (the head records seq {head_seq}, the "
                                           f"log ends at seq {prev_seq}): the last rows were deleted"))
        else:
            problems.append((prev_seq, f"seq {prev_seq}: the head records seq {head_seq} hash "
                                       f"{(head_hash or '')[:12]}…, which is not the end of the log"))
    problems.sort(key=lambda p: p[0])
    return AuditReport(ok=not problems, rows=rows, problems=[p[1] for p in problems],
                       first_bad_seq=problems[0][0] if problems else None, head_seq=head_seq, head_hash=head_hash)
