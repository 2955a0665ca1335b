"""The YAML change policy and the apply gates it drives: windows (injected clock), blast radius
(nodes drained per hour, changes per team per day), pause (policy and DB flag), approval expiry
(age, resourceVersion) and evidence age — each refusal naming its gate."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from test_appdb_migrations import DIALECTS, app_db
from test_changes_service import ADMIN, ADMIN2, BOB, RANK, T0, Clock, policy, service, workload_change

from changes.model import APPLYING, Actor, Change
from changes.policy import DEFAULT_POLICY_PATH, Policy, Window
from changes.service import ChangeService
from gpufinops.errors import ConfigError, PolicyRefused
from gpufinops.settings import load_settings


@pytest.fixture(params=DIALECTS)
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    with app_db(request.param, tmp_path) as e:
        yield e


RITA = Actor("rita", frozenset({"member:ranking"}))


def refused(gate: str, fn: Any, *args: Any, **kw: Any) -> PolicyRefused:
    with pytest.raises(PolicyRefused) as err:
        fn(*args, **kw)
    assert err.value.gate == gate, str(err.value)
    return err.value


# ---------------------------------------------------------------- the file

def test_default_policy_loads_and_is_packaged_next_to_the_code() -> None:
    p = Policy.load(None)
    assert DEFAULT_POLICY_PATH.name == "default_policy.yaml" and p.source == str(DEFAULT_POLICY_PATH)
    assert p.for_kind("consolidate_nodes").approvers == ["platform-admin"]
    assert p.for_kind("rightsize_cpu_mem").approvers == ["team-lead"]  # from "default"
    assert p.for_kind("set_mig_config").approvals == 2
    assert p.ticket_ok("OPS-12") and not p.ticket_ok("ops 12") and not p.ticket_ok(None)
    assert p.blast_radius.nodes_drained_per_hour == 4


def test_policy_errors_name_file_and_field(tmp_path: Path) -> None:
    f = tmp_path / "policy.yaml"
    f.write_text("kinds:\n  default:\n    approvers: [janitor]\n")
    with pytest.raises(ConfigError, match=r"policy\.yaml.*approvers"):
        Policy.load(f)
    f.write_text("kinds:\n  default:\n    windows: [never]\n")
    with pytest.raises(ConfigError, match="never"):
        Policy.load(f)
    f.write_text("ticket_pattern: '(['\n")
    with pytest.raises(ConfigError, match="ticket_pattern"):
        Policy.load(f)
    f.write_text("windows:\n  w: {start: '25:00'}\n")
    with pytest.raises(ConfigError, match="25:00"):
        Policy.load(f)
    f.write_text("pausd: true\n")
    with pytest.raises(ConfigError, match="pausd"):
        Policy.load(f)
    with pytest.raises(ConfigError, match="does not exist"):
        Policy.load(tmp_path / "missing.yaml")


def test_settings_name_the_policy_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "p.yaml"
    f.write_text("paused: true\n")
    monkeypatch.setenv("GPUFINOPS_CHANGE_POLICY", str(f))
    s = load_settings()
    assert s.change_policy == f and Policy.load(s.change_policy).paused


def test_windows_days_times_zones_and_midnight() -> None:
    office = Window(days=["mon", "tue", "wed", "thu", "fri"], start="09:00", end="17:00", tz="Europe/Berlin")
    assert office.contains(datetime(2026, 11, 18, 8, 0, tzinfo=UTC))  # Wed 09:00 Berlin
    assert not office.contains(datetime(2026, 11, 18, 16, 0, tzinfo=UTC))  # 17:00 Berlin: end excluded
    assert not office.contains(datetime(2026, 11, 21, 10, 0, tzinfo=UTC))  # Saturday
    night = Window(days=["fri"], start="22:00", end="04:00")
    assert night.contains(datetime(2026, 11, 20, 23, 0, tzinfo=UTC))  # Fri 23:00
    assert night.contains(datetime(2026, 11, 21, 3, 59, tzinfo=UTC))  # Sat 03:59, Friday's window
    assert not night.contains(datetime(2026, 11, 21, 23, 0, tzinfo=UTC))  # Sat 23:00
    assert not night.contains(datetime(2026, 11, 20, 3, 0, tzinfo=UTC))  # Fri 03:00 belongs to Thursday
    assert Window().contains(datetime(2026, 11, 22, 23, 59, tzinfo=UTC))  # whole week by default


# ---------------------------------------------------------------- gates at apply time

def approved(svc: ChangeService, rv: str | None = None, **kw: Any) -> Change:
    return svc.approve(workload_change(svc, **kw).id, actor=BOB, reason="ok", resource_version=rv)


def test_apply_outside_a_window_is_refused(engine: Engine) -> None:
    pol = policy(windows={"weeknight": {"days": ["mon", "tue", "wed", "thu", "fri"], "start": "20:00",
                                        "end": "06:00", "tz": "UTC"}},
                 kinds={"default": {"approvers": ["team-lead"], "windows": ["weeknight"]}})
    clock = Clock(T0)  # Wednesday 10:00 UTC
    svc = service(engine, pol, clock)
    c = approved(svc)
    err = refused("window", svc.begin_apply, c.id, actor=BOB)
    assert "weeknight" in str(err)
    assert svc.get(c.id).status == "approved"
    clock.at = T0.replace(hour=21)
    assert svc.begin_apply(c.id, actor=BOB).status == APPLYING


def _node_change(svc: ChangeService, freed: list[str]) -> Change:
    c = svc.create(actor=ADMIN, kind="consolidate_nodes", cluster="c1", namespace=None, target_kind="NodePool",
                   target_name="gpu", current={"node_pool": "gpu", "nodes": 8},
                   proposed={"nodes": 8 - len(freed), "freed_nodes": freed}, ticket="OPS-5",
                   evidence_at=T0)
    return svc.approve(c.id, actor=ADMIN2, reason="ok")


def test_blast_radius_nodes_drained_per_hour(engine: Engine) -> None:
    clock = Clock(T0)
    svc = service(engine, policy(blast_radius={"nodes_drained_per_hour": 4}), clock)
    first, second = _node_change(svc, ["n1", "n2", "n3"]), _node_change(svc, ["n4", "n5"])
    assert svc.begin_apply(first.id, actor=ADMIN).status == APPLYING
    err = refused("blast_radius", svc.begin_apply, second.id, actor=ADMIN)
    assert "3 were drained" in str(err) and "nodes_drained_per_hour is 4" in str(err)
    small = _node_change(svc, ["n6"])
    assert svc.begin_apply(small.id, actor=ADMIN).status == APPLYING  # 3 + 1 <= 4
    clock.at = T0 + timedelta(minutes=61)
    assert svc.begin_apply(second.id, actor=ADMIN).status == APPLYING  # the hour has rolled on


def test_blast_radius_changes_per_team_per_day(engine: Engine) -> None:
    clock = Clock(T0)
    svc = service(engine, policy(blast_radius={"changes_per_team_per_day": 2}), clock)
    a, b, c = approved(svc), approved(svc), approved(svc)
    other = svc.approve(workload_change(svc, ns="rank-serve", actor=RITA).id, actor=RANK, reason="ok")
    svc.begin_apply(a.id, actor=BOB)
    svc.begin_apply(b.id, actor=BOB)
    err = refused("blast_radius", svc.begin_apply, c.id, actor=BOB)
    assert "team rl" in str(err)
    assert svc.begin_apply(other.id, actor=RANK).status == APPLYING  # another team's budget
    clock.at = T0 + timedelta(hours=24, minutes=1)
    assert svc.begin_apply(c.id, actor=BOB).status == APPLYING


def test_pause_refuses_begin_apply(engine: Engine) -> None:
    svc = service(engine)
    c = approved(svc)
    svc.set_paused(True, actor=ADMIN, reason="incident")
    refused("paused", svc.begin_apply, c.id, actor=BOB)
    svc.set_paused(False, actor=ADMIN, reason="over")
    paused_by_file = service(engine, policy(paused=True))
    refused("paused", paused_by_file.begin_apply, c.id, actor=BOB)
    assert svc.begin_apply(c.id, actor=BOB).status == APPLYING
    actions = [e.action for e in svc.audit(change_id=c.id)]
    assert actions == ["propose", "approve", "refused", "refused", "begin_apply"]


def test_approval_expires_with_age(engine: Engine) -> None:
    clock = Clock(T0)
    svc = service(engine, policy(approval_ttl_hours=24, evidence_max_age_hours=None), clock)
    c = approved(svc)
    clock.at = T0 + timedelta(hours=25)
    err = refused("expired_approval", svc.begin_apply, c.id, actor=BOB)
    assert "bob" in str(err)
    clock.at = T0 + timedelta(hours=23)
    assert svc.begin_apply(c.id, actor=BOB).status == APPLYING


def test_approval_expires_when_the_target_changed(engine: Engine) -> None:
    svc = service(engine)
    c = approved(svc, target_resource_version="100", rv="100")
    err = refused("stale_target", svc.begin_apply, c.id, actor=BOB, current_resource_version="101")
    assert "100 -> 101" in str(err)
    assert svc.begin_apply(c.id, actor=BOB, current_resource_version="100").status == APPLYING


def test_evidence_age(engine: Engine) -> None:
    clock = Clock(T0)
    svc = service(engine, policy(evidence_max_age_hours=48), clock)
    c = approved(svc, evidence_at=T0 - timedelta(hours=47))
    clock.at = T0 + timedelta(hours=2)
    err = refused("evidence_age", svc.begin_apply, c.id, actor=BOB)
    assert "49.0 h" in str(err)
    fresh = approved(svc, evidence_at=T0)
    assert svc.begin_apply(fresh.id, actor=BOB).status == APPLYING


def test_ticket_rechecked_at_apply_when_policy_tightened(engine: Engine) -> None:
    svc = service(engine, policy(ticket_pattern=None))
    c = approved(svc, ticket="whatever")
    strict = service(engine, policy(ticket_pattern=r"^OPS-\d+$"))
    refused("ticket", strict.begin_apply, c.id, actor=BOB)
