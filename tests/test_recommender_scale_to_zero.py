"""``scale_to_zero_window`` from request counters: windows where requests stay at or below the threshold
on every day, the warm-up lead time before traffic returns, savings counted on the hours really off.

Pure strategy scenarios (hand-computed) as in test_recommender_strategies.py; the loader's reading of
fct_serving_requests_hourly and the warm-up annotation of fct_pods_latest is tested on a dbt-built
warehouse at the end."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from recommender.model import HOURS_PER_MONTH, HourUsage, RecommenderInput, WorkloadGpuUsage
from recommender.strategies.reclaim_idle import ReclaimIdleGpu, ReclaimIdleSettings

END = datetime(2026, 11, 15, 0, tzinfo=UTC)
DAYS = 3


def _hours(util: float = 0.5) -> tuple[HourUsage, ...]:
    # busy GPUs every hour (GPU duty alone would find no window): $2/h of GPU cost
    return tuple(HourUsage(hour=END - timedelta(hours=DAYS * 24 - i), util_mean=util, util_p95=util, samples=60,
                           fb_used_max_mib=1000.0, gpu_hours=1.0, gpu_cost_usd=2.0, total_cost_usd=2.4)
                 for i in range(DAYS * 24))


def _requests(per_hour_of_day: dict[int, float], default: float = 50.0, day_override=None) -> dict[datetime, float]:
    out = {}
    for i in range(DAYS * 24):
        hour = END - timedelta(hours=DAYS * 24 - i)
        n = per_hour_of_day.get(hour.hour, default)
        if day_override:
            n = day_override(hour, n)
        out[hour] = n
    return out


def _wl(requests: dict[datetime, float] | None, **kw: object) -> WorkloadGpuUsage:
    base = dict(cluster="c1", namespace="ns", workload="llm", tier="serving", workload_kind="Deployment",
                gpu_model="H100-80GB", gpu_resource="nvidia.com/gpu", hourly=_hours(), replicas=1, gpus_per_pod=1,
                gpu_equiv_per_pod=1.0, requests_hourly=requests)
    base.update(kw)
    return WorkloadGpuUsage(**base)  # type: ignore[arg-type]


def _run(w: WorkloadGpuUsage, **settings: object):
    data = RecommenderInput(now=END, window_start=END - timedelta(days=7), window_end=END, gpu_usage=(w,),
                            container_usage=(), mig_profiles={})
    return ReclaimIdleGpu(ReclaimIdleSettings(**settings)).run(data)  # type: ignore[arg-type]


NIGHT = {h: 0.0 for h in (1, 2, 3, 4, 5, 6)}  # no requests 01:00-07:00 UTC, traffic from 07:00


def test_requests_not_gpu_duty_find_the_window_and_the_lead_time_is_left_on() -> None:
    [r] = _run(_wl(_requests(NIGHT), warmup_seconds=1800.0))  # the pods' annotation: 30 min model load
    assert r.kind == "scale_to_zero_window"
    assert r.proposed["scale_to_zero_utc_hours"] == [1, 2, 3, 4, 5, 6]
    ev = r.evidence
    assert ev["window_source"] == "requests" and ev["request_days"] == DAYS
    assert ev["predicted_first_request_utc"] == "07:00" and ev["requests_at_return_max"] == 50.0
    assert ev["warmup_lead_seconds"] == 1800.0 and ev["warmup_source"] == "annotation"
    # off from 01:00 until 06:30, when the scale-up starts so the model is loaded by 07:00
    assert r.proposed["scale_up_at_utc"] == "06:30" and ev["off_hours_per_day"] == pytest.approx(5.5)
    assert r.est_monthly_savings_usd == pytest.approx(2.0 * HOURS_PER_MONTH * 5.5 / 24, abs=0.01)  # rounded to cents


def test_one_day_with_a_request_in_the_window_shrinks_it() -> None:
    # a request at 02:xx on one day only: 02:00 no longer qualifies; the longest block is 03:00-07:00
    one = _requests(NIGHT, day_override=lambda h, n: 1.0 if (h.hour == 2 and h.day == 13) else n)
    [r] = _run(_wl(one), default_warmup_seconds=0.0)
    assert r.proposed["scale_to_zero_utc_hours"] == [3, 4, 5, 6]
    assert r.evidence["off_hours_per_day"] == pytest.approx(4.0) and r.proposed["scale_up_at_utc"] == "07:00"
    # the default lead time (600 s) leaves 3 h 50 min off, under the 4 h a window needs
    assert _run(_wl(one)) == []


def test_threshold_setting_and_per_workload_lead_time() -> None:
    trickle = {h: 2.0 for h in range(1, 7)}
    assert _run(_wl(_requests(trickle))) == []  # 2 requests an hour are traffic at the default threshold 0
    [r] = _run(_wl(_requests(trickle), warmup_seconds=60.0), scale_to_zero_max_requests=2.0,
               warmup_seconds={"ns/llm": 3600.0})
    assert r.evidence["warmup_source"] == "setting" and r.evidence["warmup_lead_seconds"] == 3600.0
    assert r.proposed["scale_up_at_utc"] == "06:00" and r.evidence["off_hours_per_day"] == pytest.approx(5.0)


def test_a_lead_time_that_does_not_fit_before_traffic_returns_rejects_the_window() -> None:
    assert _run(_wl(_requests(NIGHT)), warmup_seconds={"ns/llm": 3 * 3600.0}) == []  # 6 − 3 = 3 h < 4 h


def test_unmeasured_hours_are_not_zero_requests() -> None:
    gaps = _requests(NIGHT)
    for h in [h for h in gaps if h.day == 14 and h.hour == 3]:
        del gaps[h]  # no counter samples at 03:00 on the 14th: that hour has two days of evidence
    [r] = _run(_wl(gaps))
    assert r.evidence["request_days"] == DAYS and r.evidence["request_days_per_hour_min"] == DAYS - 1
    # needing three days, 03:00 no longer qualifies: the blocks 01-03 and 04-07 are too short
    assert _run(_wl(gaps), min_days_for_daily_pattern=3) == []
    # a day with traffic at 03:00 is not hidden by the gap: one busy day is enough to drop the hour
    busy = dict(gaps)
    busy[next(h for h in busy if h.day == 13 and h.hour == 3)] = 9.0
    assert _run(_wl(busy)) == []


def test_without_counters_gpu_duty_still_decides() -> None:
    assert _run(_wl(None)) == []  # busy GPUs, no counters: no window


def test_loader_reads_requests_and_the_warmup_annotation_from_the_marts(fleet) -> None:
    from gpufinops.warehouse import connect
    from recommender.loader import load_input

    data = load_input(fleet.settings, now=END)
    counted = [w for w in data.gpu_usage if w.requests_hourly]
    assert counted and all(w.tier == "serving" for w in counted)
    w = max(counted, key=lambda w: sum(w.requests_hourly.values()))  # type: ignore[union-attr]
    con = connect(fleet.warehouse, read_only=True)
    try:
        mart = dict(con.execute(
            "select hour, sum(requests) from fct_serving_requests_hourly where matched and cluster = ? and namespace = ? "
            "and workload = ? group by hour", [w.cluster, w.namespace, w.workload]).fetchall())
        annotated = con.execute(
            "select max(warmup_seconds) from fct_pods_latest where cluster = ? and namespace = ? and workload = ?",
            [w.cluster, w.namespace, w.workload]).fetchone()[0]
    finally:
        con.close()
    assert {h.replace(tzinfo=None): n for h, n in w.requests_hourly.items()} == pytest.approx(  # type: ignore[union-attr]
        {h: float(n) for h, n in mart.items()})
    # the demo's serving pods carry gpufinops.io/warmup-seconds; the loader keeps the largest of a workload's pods
    assert annotated is not None and w.warmup_seconds == annotated
