"""The audit log is append-only (DB triggers refuse UPDATE/DELETE) and hash-chained: an edited row,
a deleted middle row, a deleted last row and a re-ordered pair are each detected and named by seq."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, select, text
from sqlalchemy.exc import DatabaseError
from test_appdb_migrations import DIALECTS, app_db
from test_changes_service import BOB, reach, service

from changes.audit import entry_hash, verify
from changes.model import VERIFIED
from gpufinops.appdb import as_utc
from gpufinops.appdb.schema import audit_log


@pytest.fixture(params=DIALECTS)
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    with app_db(request.param, tmp_path) as e:
        svc = service(e)
        reach(svc, VERIFIED)  # seq 1..5
        svc.reject(svc.approve(reach(svc, "proposed").id, actor=BOB, reason="ok").id, actor=BOB, reason="no")
        yield e  # 8 rows


def disable_triggers(engine: Engine) -> None:
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(text("alter table audit_log disable trigger audit_log_no_update"))
        else:
            conn.execute(text("drop trigger audit_log_no_update"))
            conn.execute(text("drop trigger audit_log_no_delete"))


def test_intact_log_verifies(engine: Engine) -> None:
    r = verify(engine)
    assert r.ok and r.rows == 8 and r.problems == [] and r.head_seq == 8 and r.first_bad_seq is None
    with engine.connect() as conn:
        assert conn.execute(text("select hash from audit_log where seq = 8")).scalar() == r.head_hash


def test_triggers_refuse_update_and_delete(engine: Engine) -> None:
    for stmt in ("update audit_log set reason = 'edited' where seq = 3", "delete from audit_log where seq = 8"):
        with pytest.raises(DatabaseError, match="append-only"):
            with engine.begin() as conn:
                conn.execute(text(stmt))
    assert verify(engine).ok


def test_edited_row_is_named(engine: Engine) -> None:
    disable_triggers(engine)
    with engine.begin() as conn:
        conn.execute(text("update audit_log set actor = 'mallory' where seq = 3"))
    r = verify(engine)
    assert not r.ok and r.first_bad_seq == 3
    assert r.problems == ["seq 3: contents do not match its hash (the row was edited)"]


def test_edited_row_with_recomputed_hash_breaks_the_next_link(engine: Engine) -> None:
    disable_triggers(engine)
    with engine.begin() as conn:
        row = conn.execute(select(audit_log).where(audit_log.c.seq == 4)).mappings().one()
        h = entry_hash(seq=4, at=as_utc(row["at"]) or row["at"], actor=row["actor"], action=row["action"],
                       change_id=row["change_id"], from_status=row["from_status"], to_status=row["to_status"],
                       reason="nothing to see", details=row["details"], prev_hash=row["prev_hash"])
        conn.execute(text("update audit_log set reason = 'nothing to see', hash = :h where seq = 4"), {"h": h})
    r = verify(engine)
    assert r.first_bad_seq == 5 and "seq 5: prev_hash" in r.problems[0]


def test_deleted_middle_row_is_named(engine: Engine) -> None:
    disable_triggers(engine)
    with engine.begin() as conn:
        conn.execute(text("delete from audit_log where seq = 5"))
    r = verify(engine)
    assert not r.ok and r.first_bad_seq == 5
    assert r.problems[0].startswith("seq 5: missing")
    assert any(p.startswith("seq 6: prev_hash") for p in r.problems)


def test_deleted_last_row_is_named(engine: Engine) -> None:
    disable_triggers(engine)
    with engine.begin() as conn:
        conn.execute(text("delete from audit_log where seq = 8"))
    r = verify(engine)
    assert not r.ok and r.first_bad_seq == 8 and r.rows == 7
    assert r.problems == ["seq 8: missing (the head records seq 8, the log ends at seq 7): the last rows were deleted"]


def test_swapped_rows_are_named(engine: Engine) -> None:
    disable_triggers(engine)
    with engine.begin() as conn:  # swap the contents of seq 2 and 3 (keeping seq numbers)
        rows = {r["seq"]: dict(r) for r in conn.execute(text("select * from audit_log where seq in (2, 3)")).mappings()}
        for seq, other in ((2, 3), (3, 2)):
            conn.execute(text("update audit_log set actor = :a, action = :ac, from_status = :f, to_status = :t, "
                              "prev_hash = :p, hash = :h where seq = :s"),
                         {"a": rows[other]["actor"], "ac": rows[other]["action"], "f": rows[other]["from_status"],
                          "t": rows[other]["to_status"], "p": rows[other]["prev_hash"], "h": rows[other]["hash"],
                          "s": seq})
    r = verify(engine)
    assert not r.ok and r.first_bad_seq == 2
