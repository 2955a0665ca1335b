"""Join the fields of one device (or container) series into one landing row per timestamp.

Series arrive one loader at a time; each is mapped to its identity (see :mod:`labels`) and kept as
numpy arrays. :meth:`Assembler.table` pivots them all at once (sort by identity and time, one row
per distinct pair), so the work is vectorised however many series a request brought back.
Non-finite values are dropped and counted here, the one place every path goes through.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from ingest.prometheus.labels import LabelError
from ingest.prometheus.queries import SourceSpec
from ingest.schema import TS, get_table

__all__ = ["Assembler", "Counts", "ParsedSeries", "parse_matrix"]


@dataclass
class Counts:
    """What an ingest saw and dropped; reported in the run summary."""

    series: int = 0
    samples: int = 0  # finite samples kept
    nan_dropped: int = 0  # NaN values (incl. any staleness marker that reaches us as NaN)
    inf_dropped: int = 0
    duplicate_samples: int = 0  # same identity, field and time from two series: the last one wins
    skipped_series: int = 0
    skipped_examples: list[str] = field(default_factory=list)
    rows: int = 0

    def merge(self, other: Counts) -> None:
        for name in ("series", "samples", "nan_dropped", "inf_dropped", "duplicate_samples", "skipped_series", "rows"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.skipped_examples = (self.skipped_examples + other.skipped_examples)[:5]

    def as_dict(self) -> dict[str, object]:
        return {
            "series": self.series,
            "samples": self.samples,
            "rows": self.rows,
            "nan_dropped": self.nan_dropped,
            "inf_dropped": self.inf_dropped,
            "duplicate_samples": self.duplicate_samples,
            "skipped_series": self.skipped_series,
            "skipped_examples": list(self.skipped_examples),
        }


class Assembler:
    """Collects series of one source's loaders; :meth:`table` returns the landing rows."""

    def __init__(self, spec: SourceSpec, columns: Sequence[str]):
        self.spec = spec
        self.columns = list(columns)
        self.counts = Counts()
        self._col_index = {c: i for i, c in enumerate(self.columns)}
        self._ids: dict[tuple, int] = {}
        self._parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []

    def add_series(self, column: str, labels: Mapping[str, str], ts_us: np.ndarray, values: np.ndarray) -> None:
        """One series of one field: times in µs since the epoch (UTC) and float values."""
        self.counts.series += 1
        try:
            ident = self.spec.identity(labels)
        except LabelError as exc:
            self.counts.skipped_series += 1
            if len(self.counts.skipped_examples) < 5:
                self.counts.skipped_examples.append(f"{_series_name(labels)}: {exc}")
            return
        nan = np.isnan(values)
        finite = np.isfinite(values)
        self.counts.nan_dropped += int(nan.sum())
        self.counts.inf_dropped += int((~finite & ~nan).sum())
        n = int(finite.sum())
        if n == 0:
            return
        self.counts.samples += n
        sid = self._ids.setdefault(ident, len(self._ids))
        self._parts.append(
            (
                np.full(n, sid, dtype=np.int64),
                ts_us[finite].astype(np.int64, copy=False),
                np.full(n, self._col_index[column], dtype=np.int8),
                values[finite].astype(np.float64, copy=False),
            )
        )

    def add_matrix(self, column: str, result: list[dict]) -> None:
        """A ``query_range`` result: ``[{"metric": {...}, "values": [[ts, "v"], ...]}, ...]``."""
        self.add_parsed(column, parse_matrix(result))

    def add_parsed(self, column: str, parsed: list[ParsedSeries]) -> None:
        for labels, ts_us, values in parsed:
            self.add_series(column, labels, ts_us, values)

    def table(self) -> pa.Table:
        """The pivoted rows (identity columns, ``ts`` and one column per field); resets nothing."""
        landing = get_table(self.spec.table)
        if not self._parts:
            return landing.schema.empty_table()
        sid, ts, col, val = (np.concatenate([p[i] for p in self._parts]) for i in range(4))
        order = np.lexsort((col, ts, sid))
        sid, ts, col, val = sid[order], ts[order], col[order], val[order]
        new_row = np.ones(len(sid), dtype=bool)
        new_row[1:] = (sid[1:] != sid[:-1]) | (ts[1:] != ts[:-1])
        same_cell = np.zeros(len(sid), dtype=bool)
        same_cell[1:] = ~new_row[1:] & (col[1:] == col[:-1])
        self.counts.duplicate_samples += int(same_cell.sum())
        row = np.cumsum(new_row) - 1
        nrows = int(row[-1]) + 1
        self.counts.rows += nrows
        starts = np.flatnonzero(new_row)

        out: dict[str, pa.Array] = {}
        ids = list(self._ids)  # sid -> identity, in insertion order
        row_sid = sid[starts]
        for j, name in enumerate(self.spec.identity_columns):
            per_sid = pa.array([i[j] for i in ids], type=landing.schema.field(name).type)
            out[name] = per_sid.take(pa.array(row_sid))
        out[landing.time_column] = pa.array(ts[starts], type=pa.int64()).cast(TS)
        for k, name in enumerate(self.columns):
            mask = col == k
            values = np.full(nrows, np.nan)
            present = np.zeros(nrows, dtype=bool)
            values[row[mask]] = val[mask]  # later duplicates overwrite earlier ones
            present[row[mask]] = True
            out[name] = pa.array(values, type=landing.schema.field(name).type, mask=~present)
        return pa.table(out)


ParsedSeries = tuple[dict[str, str], np.ndarray, np.ndarray]


def parse_matrix(result: list[dict]) -> list[ParsedSeries]:
    """A ``query_range`` matrix as (labels, µs times, values) arrays: compact enough to hold several
    responses at once, and free of the Assembler's state, so it can run in a fetching thread."""
    out: list[ParsedSeries] = []
    for series in result:
        vals = series.get("values") or []
        n = len(vals)
        ts = np.fromiter((v[0] for v in vals), np.float64, n)
        # numpy parses "NaN", "+Inf" and "-Inf" itself.
        values = np.array([v[1] for v in vals], dtype=np.float64) if n else np.empty(0)
        out.append((series.get("metric", {}), np.round(ts * 1e6).astype(np.int64), values))
    return out


def _series_name(labels: Mapping[str, str]) -> str:
    name = labels.get("__name__", "")
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()) if k != "__name__")
    return f"{name}{{{inner}}}"
