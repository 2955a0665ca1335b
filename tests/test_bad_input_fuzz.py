"""Fuzz the three parsers of outside text: the exposition format, the FOCUS reader and the dump
reader (with the mapping to rows). The only failure accepted is a clean :class:`InputError`.

Bounded per run: ``FUZZ_EXAMPLES`` examples per parser (hypothesis, derandomised so a run is
reproducible; set ``GPUFINOPS_FUZZ_EXAMPLES`` to run more)."""

from __future__ import annotations

import json
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from badinput import DCGM, DUMP, FOCUS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpufinops.errors import InputError
from ingest.focus.reader import read_focus_file
from ingest.k8s.dump import parse_dump
from ingest.k8s.snapshot import snapshot_tables
from ingest.prometheus.exposition import parse_exposition

FUZZ_EXAMPLES = int(os.environ.get("GPUFINOPS_FUZZ_EXAMPLES", "150"))
_SETTINGS = settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=True,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

_DCGM_LINES = DCGM.read_text().splitlines()
_FOCUS_LINES = FOCUS.read_text().splitlines()
_TOKENS = ["{", "}", "=", ",", '"', "\\", " ", "#", "# EOF", "NaN", "+Inf", "-1", "1e309", "9" * 20, "\n", "\t", "\x00", "é",
           "{}", "[]", "null", "0.5"]


def _mutated_lines(lines: list[str]) -> st.SearchStrategy[str]:
    """The fixture's lines, some dropped, repeated or cut, with tokens spliced in."""
    line = st.one_of(st.sampled_from(lines), st.text(max_size=40), st.sampled_from(_TOKENS))
    spliced = st.tuples(st.sampled_from(lines), st.integers(0, 200), st.sampled_from(_TOKENS)).map(
        lambda t: t[0][: t[1]] + t[2] + t[0][t[1]:])
    return st.lists(st.one_of(line, spliced), max_size=30).map("\n".join)


def _write(suffix: str, text: str | bytes) -> Path:
    fd, name = tempfile.mkstemp(suffix=suffix)
    with os.fdopen(fd, "wb") as fh:
        fh.write(text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text)
    return Path(name)


@_SETTINGS
@given(_mutated_lines(_DCGM_LINES))
def test_exposition_parser_fails_only_cleanly(text: str) -> None:
    path = _write(".prom", text)
    try:
        for s in parse_exposition(path):
            assert s.ts_s is None or 0 <= s.ts_s < 7258118400.0
    except InputError as exc:
        assert str(path) in str(exc)
    finally:
        path.unlink()


@_SETTINGS
@given(_mutated_lines(_FOCUS_LINES))
def test_focus_reader_fails_only_cleanly(text: str) -> None:
    path = _write(".csv", text)
    try:
        f = read_focus_file(path)
        for name in ("BilledCost", "EffectiveCost"):
            assert all(v is not None and v == v and abs(v) != float("inf") for v in f.table[name].to_pylist())
    except InputError as exc:
        assert str(path) in str(exc)
    finally:
        path.unlink()


_DOC = json.loads(DUMP.read_text())
_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=12)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)


@st.composite
def _mutated_dump(draw: st.DrawFn) -> bytes:
    doc = json.loads(json.dumps(_DOC))
    for _ in range(draw(st.integers(1, 4))):
        item = doc["items"][draw(st.integers(0, len(doc["items"]) - 1))]
        target = item
        path = draw(st.lists(st.sampled_from(["metadata", "spec", "status", "labels", "containers", "resources",
                                              "requests", "capacity", "name", "namespace", "uid", "nodeName", "0"]),
                             min_size=1, max_size=4))
        for key in path[:-1]:
            nxt = target.get(key) if isinstance(target, dict) else (target[0] if isinstance(target, list) and target else None)
            if not isinstance(nxt, dict | list):
                break
            target = nxt
        if isinstance(target, dict):
            target[path[-1]] = draw(_JSON)
    raw = json.dumps(doc).encode()
    if draw(st.booleans()):
        cut = draw(st.integers(0, len(raw)))
        raw = raw[:cut] + draw(st.binary(max_size=8)) + raw[cut:]
    return raw


@_SETTINGS
@given(_mutated_dump())
def test_dump_reader_fails_only_cleanly(raw: bytes) -> None:
    try:
        snap = parse_dump(raw, "fuzz.json", datetime(2026, 11, 1, 4, tzinfo=UTC))
        snapshot_tables(snap)
    except InputError as exc:
        assert "fuzz.json" in str(exc)
