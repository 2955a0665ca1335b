"""Two approvers at once and two appliers at once, each in its own thread and DB connection, over
several rounds: exactly one wins each time, the other gets Conflict; the audit chain stays intact.
PostgreSQL (real row locks) is the point; SQLite (one writer, BEGIN IMMEDIATE) is checked too."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select
from test_appdb_migrations import DIALECTS, app_db
from test_changes_service import BOB, CAROL, service, workload_change

from changes.audit import verify
from changes.model import APPLYING, APPROVED, Actor
from gpufinops.appdb.schema import approvals, audit_log
from gpufinops.errors import Conflict

ROUNDS = 5
DAVE = Actor("dave", frozenset({"team-lead:rl"}))


@pytest.fixture(params=DIALECTS)
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    with app_db(request.param, tmp_path, pool_size=4) as e:
        yield e


def race(*calls: Callable[[], Any]) -> tuple[list[Any], list[BaseException]]:
    """Run the calls in threads released together; results and errors."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def run(fn: Callable[[], Any]) -> None:
        barrier.wait()
        try:
            out = fn()
        except BaseException as exc:  # noqa: BLE001 - collected and asserted on
            with lock:
                errors.append(exc)
            return
        with lock:
            results.append(out)

    threads = [threading.Thread(target=run, args=(fn,)) for fn in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    return results, errors


def test_two_concurrent_approvers_exactly_one_wins(engine: Engine) -> None:
    svc = service(engine)
    for _ in range(ROUNDS):
        c = workload_change(svc)  # one approval needed
        results, errors = race(partial(svc.approve, c.id, actor=BOB, reason="a"),
                               partial(svc.approve, c.id, actor=CAROL, reason="b"))
        assert len(results) == 1 and len(errors) == 1, errors
        assert isinstance(errors[0], Conflict)
        after = svc.get(c.id)
        assert after.status == APPROVED and after.version == 2 and len(after.approvals) == 1
    assert verify(engine).ok


def test_two_concurrent_approvers_of_a_two_approval_change_both_count(engine: Engine) -> None:
    svc = service(engine)
    for _ in range(ROUNDS):
        c = workload_change(svc, kind="rightsize_gpu_count")
        results, errors = race(partial(svc.approve, c.id, actor=BOB, reason="a"),
                               partial(svc.approve, c.id, actor=CAROL, reason="b"))
        assert errors == [] and len(results) == 2
        after = svc.get(c.id)
        assert after.status == APPROVED and after.version == 3 and sorted(after.approvers) == ["bob", "carol"]
    assert verify(engine).ok


def test_two_concurrent_appliers_exactly_one_apply(engine: Engine) -> None:
    svc = service(engine)
    for _ in range(ROUNDS):
        c = svc.approve(workload_change(svc).id, actor=BOB, reason="ok")
        results, errors = race(partial(svc.begin_apply, c.id, actor=BOB),
                               partial(svc.begin_apply, c.id, actor=DAVE))
        assert len(results) == 1 and len(errors) == 1, errors
        assert isinstance(errors[0], Conflict) and "applying" in str(errors[0])
        assert results[0].status == APPLYING and svc.get(c.id).version == 3
        with engine.connect() as conn:
            n = conn.execute(select(func.count()).select_from(audit_log).where(
                audit_log.c.change_id == c.id, audit_log.c.action == "begin_apply")).scalar()
            assert n == 1
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(approvals)).scalar() == ROUNDS
    assert verify(engine).ok
