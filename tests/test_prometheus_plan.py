"""Pure parts of the Prometheus ingest: time windows, matcher escaping, durations, timeouts."""

from __future__ import annotations

import socket
from datetime import UTC, datetime, timedelta

import pytest

from gpufinops.errors import ConfigError, InputError, TransientError
from ingest.prometheus import PromClient, SplitLimits, time_windows
from ingest.prometheus.plan import _regex_alternation
from ingest.prometheus.timeparse import parse_duration, parse_time

T = datetime(2025, 3, 1, tzinfo=UTC)


def test_windows_cover_the_range_without_gaps_and_respect_the_point_cap():
    limits = SplitLimits(max_points_per_series=11_000, max_window_s=10 * 86_400)
    ws = time_windows(T + timedelta(seconds=17), T + timedelta(days=20), 60, limits)
    assert ws[0].start == T  # aligned down to the step grid
    assert ws[-1].end == T + timedelta(days=20)
    assert all(a.end == b.start for a, b in zip(ws, ws[1:], strict=False))
    assert max(w.points for w in ws) == 11_000 and len(ws) == 3  # 28,800 points in 11,000-point windows
    assert all(w.last < w.end and w.last + timedelta(seconds=60) >= w.end for w in ws)


def test_windows_are_capped_by_max_window():
    ws = time_windows(T, T + timedelta(days=2, hours=1), 60, SplitLimits())
    assert [w.end - w.start for w in ws] == [timedelta(days=1), timedelta(days=1), timedelta(hours=1)]


def test_split_limits_reject_more_than_prometheus_allows():
    with pytest.raises(ConfigError, match="max_points_per_series"):
        SplitLimits(max_points_per_series=20_000)


def test_regex_alternation_escapes_for_re2_and_promql_strings():
    assert _regex_alternation(["a.b", 'q"x']) == 'a\\\\.b|q\\"x'


@pytest.mark.parametrize(("text", "seconds"), [("60s", 60), ("5m", 300), ("1h30m", 5400), ("250ms", 0.25), ("90", 90)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


def test_bad_duration_and_time_name_the_option():
    with pytest.raises(InputError, match="--step '5 minutes'"):
        parse_duration("5 minutes", option="--step")
    with pytest.raises(InputError, match="--start 'yesterday'"):
        parse_time("yesterday", option="--start")
    assert parse_time("2025-03-01T00:00:00Z") == T == parse_time(str(int(T.timestamp()))) == parse_time("2025-03-01 00:00")


def test_a_server_that_never_answers_times_out_as_transient():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)  # accepts connections, never replies
    port = srv.getsockname()[1]
    try:
        with PromClient(f"http://127.0.0.1:{port}", timeout_s=0.2, retries=1, sleep=lambda s: None) as c, \
                pytest.raises(TransientError, match="failed 2 times.*Timeout"):
            c.query("up", T)
    finally:
        srv.close()
