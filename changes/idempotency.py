"""Idempotency keys for POSTs: the same key and the same request replay the stored response; the same
key with a different request is a Conflict. Keys are per actor (PK actor, key).

The API calls ``lookup`` before doing the work and ``save`` after it (ideally on the same connection,
inside the work's transaction, so that a crash cannot store one without the other).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Engine, select
from sqlalchemy.exc import IntegrityError

from changes.audit import jsonable
from gpufinops.appdb.schema import idempotency_keys
from gpufinops.errors import Conflict

__all__ = ["StoredResponse", "request_hash", "lookup", "save"]


@dataclass(frozen=True)
class StoredResponse:
    key: str
    actor: str
    method_path: str
    request_hash: str
    response: Any
    status_code: int
    created_at: datetime


def request_hash(body: Any) -> str:
    """sha256 of the canonical JSON of a request (method + path + body is what callers pass)."""
    canon = json.dumps(jsonable(body), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canon.encode()).hexdigest()


@contextmanager
def _conn(bind: Engine | Connection) -> Iterator[Connection]:
    if isinstance(bind, Connection):
        yield bind
        return
    with bind.begin() as conn:
        yield conn


def lookup(bind: Engine | Connection, *, actor: str, key: str, method_path: str,
           request_hash: str) -> StoredResponse | None:
    """The stored response for (actor, key), or None. Conflict if the key was used for another request."""
    t = idempotency_keys
    with _conn(bind) as conn:
        row = conn.execute(select(t).where(t.c.actor == actor, t.c.key == key)).mappings().first()
    if row is None:
        return None
    if row["request_hash"] != request_hash or row["method_path"] != method_path:
        raise Conflict(f"Idempotency-Key {key!r} was already used by {actor} for a different request "
                       f"({row['method_path']}); use a new key")
    created = row["created_at"]
    if created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    return StoredResponse(key=key, actor=actor, method_path=row["method_path"], request_hash=row["request_hash"],
                          response=row["response"], status_code=int(row["status_code"]), created_at=created)


def save(bind: Engine | Connection, *, actor: str, key: str, method_path: str, request_hash: str,
         response: Any, status_code: int, at: datetime | None = None) -> StoredResponse:
    """Store the response for (actor, key). If another request stored it first, return that one
    (or Conflict when it was a different request)."""
    at = at or datetime.now(UTC)
    stored = json.loads(json.dumps(jsonable(response)))
    values = dict(actor=actor, key=key, method_path=method_path, request_hash=request_hash, response=stored,
                  status_code=status_code, created_at=at)
    if isinstance(bind, Connection):
        try:
            with bind.begin_nested():
                bind.execute(idempotency_keys.insert().values(**values))
        except IntegrityError:
            existing = lookup(bind, actor=actor, key=key, method_path=method_path, request_hash=request_hash)
            assert existing is not None
            return existing
    else:
        try:
            with bind.begin() as conn:
                conn.execute(idempotency_keys.insert().values(**values))
        except IntegrityError:
            existing = lookup(bind, actor=actor, key=key, method_path=method_path, request_hash=request_hash)
            assert existing is not None
            return existing
    return StoredResponse(key=key, actor=actor, method_path=method_path, request_hash=request_hash,
                          response=stored, status_code=status_code, created_at=at)
