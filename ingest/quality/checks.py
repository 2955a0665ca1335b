"""The kinds of expectation a landing-table suite is made of: one small typed class each.

Every check has two faces that must agree:
- :meth:`Check.find` — an exact, vectorised test of the *whole* batch with ``pyarrow.compute``
  (or a row hash for keys); it decides whether the batch passes;
- :meth:`Check.expectation` — the same rule as a Great Expectations expectation, run by the gate on
  the offending rows only, to express the failure and to produce the result the message is made from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "Check",
    "Found",
    "NotNull",
    "InRange",
    "InSet",
    "UniqueKey",
    "PairOrdered",
    "QuantitiesInRange",
    "CHECK_KINDS",
    "format_value",
]

# Rows handed to GX per failed check: enough for a faithful result and a few examples, bounded so
# that a batch of millions of bad rows does not turn the failure path into a pandas marathon.
GE_MAX_ROWS = 2000
_EXAMPLES = 3


@dataclass
class Found:
    """What :meth:`Check.find` saw: the exact count over the batch and the offending row indices."""

    count: int  # offending values (rows; for keys: rows sharing a duplicated key)
    rows: pa.Array  # int64 indices into the batch, ascending (all of them)
    examples: list[Any]  # a few offending values, as pyarrow saw them
    detail: str = ""  # extra words for the message (e.g. number of duplicated keys)


def format_value(v: Any) -> str:
    if isinstance(v, float | np.floating):
        return "nan" if v != v else repr(round(float(v), 6))
    if isinstance(v, tuple):
        return "(" + ", ".join(format_value(x) for x in v) + ")"
    if isinstance(v, dict):
        return "(" + ", ".join(f"{k}={format_value(x)}" for k, x in v.items()) + ")"
    if hasattr(v, "isoformat"):  # every time in the lake is UTC; GX sees them zone-less
        text = v.isoformat()
        return text.replace("+00:00", "Z") if getattr(v, "tzinfo", None) is not None else text + "Z"
    if v is None or (not isinstance(v, str) and _is_na(v)):
        return "null"
    return repr(v) if isinstance(v, str) else str(v)


def _is_na(v: Any) -> bool:
    try:
        return bool(v != v)
    except (TypeError, ValueError):
        return False


def _first_distinct(values: list[Any], n: int = _EXAMPLES) -> list[Any]:
    out: list[Any] = []
    seen: set[str] = set()
    for v in values:
        k = format_value(v)
        if k not in seen:
            seen.add(k)
            out.append(v)
        if len(out) == n:
            break
    return out


def to_pandas(table: pa.Table) -> Any:
    """A pandas frame for GX, with UTC times made zone-less (GX's pandas path drops zones anyway)."""
    df = table.to_pandas()
    for name in df.columns:
        if getattr(df[name].dtype, "tz", None) is not None:
            df[name] = df[name].dt.tz_convert(None)
    return df


def _rows_of(mask: pa.ChunkedArray | pa.Array) -> pa.Array:
    return pc.indices_nonzero(pc.fill_null(mask, False))  # type: ignore[attr-defined]


class Check:
    """One rule over a landing table. Subclasses are small frozen dataclasses."""

    kind: ClassVar[str] = ""

    @property
    def label(self) -> str:
        """The column (or columns) a message names, after ``<table>.``."""
        raise NotImplementedError

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns GX needs to see to evaluate :meth:`expectation`."""
        raise NotImplementedError

    def find(self, data: pa.Table) -> Found | None:
        """Exact test of the whole batch; ``None`` when every row passes."""
        raise NotImplementedError

    def expectation(self, gxe: Any) -> Any:
        raise NotImplementedError

    def frame(self, data: pa.Table, rows: pa.Array) -> Any:
        """The pandas frame GX validates: the offending rows (bounded) of :attr:`columns`."""
        return to_pandas(data.select(list(self.columns)).take(rows[:GE_MAX_ROWS]))

    def describe(self, count: int, examples: list[Any], detail: str) -> str:
        """The message after ``<table>.<label>: `` — a count, what is wrong, a few examples."""
        raise NotImplementedError

    def ge_examples(self, values: list[Any]) -> list[Any]:
        """Examples for the message from GX's ``partial_unexpected_list`` (empty: use pyarrow's)."""
        return values

    def applies_to(self, data: pa.Table) -> bool:
        return all(c in data.column_names for c in self._source_columns())

    def _source_columns(self) -> tuple[str, ...]:
        return self.columns


def _eg(examples: list[Any]) -> str:
    return (", e.g. " + ", ".join(format_value(v) for v in examples)) if examples else ""


@dataclass(frozen=True)
class _OneColumn(Check):
    """A check of one column: its label and columns are that column."""

    column: str

    @property
    def label(self) -> str:
        return self.column

    @property
    def columns(self) -> tuple[str, ...]:
        return (self.column,)


@dataclass(frozen=True)
class NotNull(_OneColumn):
    kind: ClassVar[str] = "not_null"

    def find(self, data: pa.Table) -> Found | None:
        col = data.column(self.column)
        if col.null_count == 0:
            return None
        rows = _rows_of(pc.is_null(col))
        return Found(len(rows), rows, [], detail=f"first at row {rows[0].as_py()}")

    def expectation(self, gxe: Any) -> Any:
        return gxe.ExpectColumnValuesToNotBeNull(column=self.column)

    def frame(self, data: pa.Table, rows: pa.Array) -> Any:
        # Nested values (maps, lists) mean nothing to GX's null test; their validity does.
        col = data.column(self.column)
        if pa.types.is_nested(col.type):
            col = pc.if_else(pc.is_null(col), pa.scalar(None, pa.bool_()), True)
        return to_pandas(pa.table({self.column: col}).take(rows[:GE_MAX_ROWS]))

    def ge_examples(self, values: list[Any]) -> list[Any]:
        return []  # GX lists the nulls themselves; the row numbers say more

    def describe(self, count: int, examples: list[Any], detail: str) -> str:
        return f"{count} null value{'s' if count != 1 else ''} in a required column ({detail})"


@dataclass(frozen=True)
class InRange(_OneColumn):
    """``min_value <= v <= max_value`` (``<`` with ``strict_min``); NaN is out of range, null is not checked."""

    min_value: float | None = None
    max_value: float | None = None
    strict_min: bool = False
    check_nan: bool = True  # False for an extra upper-bound check beside a check that already flags NaN
    kind: ClassVar[str] = "in_range"

    def _mask(self, col: pa.ChunkedArray) -> pa.ChunkedArray:
        parts = []
        if self.min_value is not None:
            lo = self.min_value
            parts.append(pc.less_equal(col, lo) if self.strict_min else pc.less(col, lo))
        if self.max_value is not None:
            parts.append(pc.greater(col, self.max_value))
        if pa.types.is_floating(col.type) and self.check_nan:
            parts.append(pc.is_nan(col))
        mask = parts[0]
        for p in parts[1:]:
            mask = pc.or_(mask, p)
        return pc.fill_null(mask, False)

    def find(self, data: pa.Table) -> Found | None:
        col = data.column(self.column)
        if col.null_count == len(col):
            return None
        mask = self._mask(col)
        if not pc.any(mask).as_py():
            return None
        rows = _rows_of(mask)
        return Found(len(rows), rows, _first_distinct(col.take(rows[:50]).to_pylist()))

    def expectation(self, gxe: Any) -> Any:
        return gxe.ExpectColumnValuesToBeBetween(
            column=self.column, min_value=self.min_value, max_value=self.max_value, strict_min=self.strict_min
        )

    def describe(self, count: int, examples: list[Any], detail: str) -> str:
        s = "s" if count != 1 else ""
        lo, hi = self.min_value, self.max_value
        if lo is not None and hi is not None:
            what = f"outside [{lo:g}, {hi:g}]"
        elif lo is not None:
            what = f"not > {lo:g}" if self.strict_min else f"below {lo:g}"
        else:
            what = f"above {hi:g}"
        return f"{count} value{s} {what}{_eg(examples)}"


@dataclass(frozen=True)
class InSet(_OneColumn):
    value_set: tuple[str, ...]
    kind: ClassVar[str] = "in_set"

    def find(self, data: pa.Table) -> Found | None:
        col = data.column(self.column)
        mask = pc.and_(pc.is_valid(col), pc.invert(pc.is_in(col, value_set=pa.array(self.value_set, col.type))))
        if not pc.any(mask).as_py():
            return None
        rows = _rows_of(mask)
        return Found(len(rows), rows, _first_distinct(col.take(rows[:200]).to_pylist()))

    def expectation(self, gxe: Any) -> Any:
        return gxe.ExpectColumnValuesToBeInSet(column=self.column, value_set=list(self.value_set))

    def describe(self, count: int, examples: list[Any], detail: str) -> str:
        s = "s" if count != 1 else ""
        return f"{count} value{s} not in {{{', '.join(self.value_set)}}}{_eg(examples)}"


@dataclass(frozen=True)
class UniqueKey(Check):
    """The key columns are unique within the batch (nulls compare equal, as in a GROUP BY).

    The whole batch is hashed (vectorised, single-threaded numpy over dictionary codes); only rows
    whose hash repeats are then grouped exactly, so a hash collision can never reject a clean batch.
    """

    key: tuple[str, ...]
    kind: ClassVar[str] = "unique_key"

    @property
    def label(self) -> str:
        return "(" + ", ".join(self.key) + ")"

    @property
    def columns(self) -> tuple[str, ...]:
        return self.key

    def find(self, data: pa.Table) -> Found | None:
        if data.num_rows < 2:
            return None
        keys = data.select(list(self.key))
        hashes = _row_hashes(keys)
        ordered = np.sort(hashes)
        repeated = ordered[1:][ordered[1:] == ordered[:-1]]
        if len(repeated) == 0:
            return None
        candidates = np.flatnonzero(np.isin(hashes, repeated))
        groups = (
            keys.take(pa.array(candidates))
            .append_column("_row", pa.array(candidates, pa.int64()))
            .group_by(list(self.key), use_threads=False)
            .aggregate([("_row", "list")])
        )
        groups = groups.filter(pc.greater(pc.list_value_length(groups.column("_row_list")), 1))
        if groups.num_rows == 0:
            return None  # only hash collisions
        rows = pc.list_flatten(groups.column("_row_list")).combine_chunks()
        rows = pc.take(rows, pc.sort_indices(rows))
        examples = [tuple(r[k] for k in self.key) for r in groups.slice(0, _EXAMPLES).select(list(self.key)).to_pylist()]
        return Found(len(rows), rows, examples, detail=f"{groups.num_rows} duplicated key{'s' if groups.num_rows != 1 else ''}")

    def frame(self, data: pa.Table, rows: pa.Array) -> Any:
        dup = data.select(list(self.key)).take(rows)
        if len(rows) <= GE_MAX_ROWS:
            return to_pandas(dup)
        # Keep duplicate groups together (sorted by key) so that the rows GX sees still repeat.
        return to_pandas(dup.take(pc.sort_indices(dup, [(k, "ascending") for k in self.key])).slice(0, GE_MAX_ROWS))

    def ge_examples(self, values: list[Any]) -> list[Any]:
        # pandas shows a null key part as NaN/NaT; print it as the null it is
        return [
            tuple(None if _is_na(v.get(k)) else v.get(k) for k in self.key) if isinstance(v, dict)
            else (None if _is_na(v) else v,) if len(self.key) == 1 else v
            for v in values
        ]

    def expectation(self, gxe: Any) -> Any:
        if len(self.key) == 1:
            return gxe.ExpectColumnValuesToBeUnique(column=self.key[0])
        return gxe.ExpectCompoundColumnsToBeUnique(column_list=list(self.key), ignore_row_if="never")

    def describe(self, count: int, examples: list[Any], detail: str) -> str:
        return f"{count} rows share a key ({detail}){_eg(examples)}"


@dataclass(frozen=True)
class PairOrdered(Check):
    """``later > earlier`` (or ``>=``) wherever both are set."""

    later: str
    earlier: str
    or_equal: bool = False
    kind: ClassVar[str] = "pair_ordered"

    @property
    def label(self) -> str:
        return self.later

    @property
    def columns(self) -> tuple[str, ...]:
        return (self.earlier, self.later)

    def find(self, data: pa.Table) -> Found | None:
        a, b = data.column(self.later), data.column(self.earlier)
        mask = pc.fill_null(pc.less(a, b) if self.or_equal else pc.less_equal(a, b), False)
        if not pc.any(mask).as_py():
            return None
        rows = _rows_of(mask)
        pairs = data.select([self.earlier, self.later]).take(rows[:_EXAMPLES]).to_pylist()
        return Found(len(rows), rows, [dict(p) for p in pairs])

    def expectation(self, gxe: Any) -> Any:
        return gxe.ExpectColumnPairValuesAToBeGreaterThanB(
            column_A=self.later, column_B=self.earlier, or_equal=self.or_equal, ignore_row_if="either_value_is_missing"
        )

    def ge_examples(self, values: list[Any]) -> list[Any]:
        return []  # GX lists the pairs as zone-less strings; pyarrow's examples name both columns

    def describe(self, count: int, examples: list[Any], detail: str) -> str:
        s = "s" if count != 1 else ""
        op = ">=" if self.or_equal else ">"
        return f"{count} row{s} where {self.later} is not {op} {self.earlier}{_eg(examples)}"


@dataclass(frozen=True)
class QuantitiesInRange(Check):
    """Every quantity in a resource map (``capacity``) or in the containers' ``requests``/``limits``
    maps (``containers.requests``) is >= ``min_value`` and not NaN.

    GX sees a derived column per row, the smallest quantity of the row (NaN where one is NaN).
    """

    column: str  # "capacity" or "containers.requests"
    min_value: float = 0.0
    max_value: float = float("inf")
    kind: ClassVar[str] = "quantities_in_range"

    @property
    def label(self) -> str:
        return self.column

    @property
    def columns(self) -> tuple[str, ...]:
        return (self._derived,)

    @property
    def _derived(self) -> str:
        return self.column.replace(".", "_") + "_min"

    def _source_columns(self) -> tuple[str, ...]:
        return (self.column.split(".")[0],)

    def _flat(self, data: pa.Table) -> tuple[pa.Array, pa.Array, pa.Array]:
        """(row index, resource name, quantity) for every quantity in the batch."""
        top, _, field = self.column.partition(".")
        arr = data.column(top).combine_chunks()
        if field:  # list<struct<..., field: map>>: container -> row, item -> container
            row_of_container = pc.list_parent_indices(arr).to_numpy()
            container_of_item, names, values = _map_items(pc.struct_field(pc.list_flatten(arr), field))
            return pa.array(row_of_container[container_of_item]), names, values
        rows, names, values = _map_items(arr)
        return pa.array(rows), names, values

    def _values(self, data: pa.Table) -> pa.Array:
        """Just the quantities (no parent rows): the cheap pass over a clean batch."""
        top, _, field = self.column.partition(".")
        arr = data.column(top).combine_chunks()
        maps = pc.struct_field(pc.list_flatten(arr), field) if field else arr
        offsets = maps.offsets
        lo, hi = offsets[0].as_py(), offsets[-1].as_py()
        return maps.items.slice(lo, hi - lo)

    def find(self, data: pa.Table) -> Found | None:
        values = self._values(data)
        if len(values) == 0 or values.null_count == len(values):
            return None
        mm = pc.min_max(values)
        low, high = mm["min"].as_py(), mm["max"].as_py()
        nan = self.min_value != float("-inf") and pc.any(pc.is_nan(values)).as_py()
        if (low is None or (low >= self.min_value and high <= self.max_value)) and not nan:
            return None
        rows, names, values = self._flat(data)
        out = pc.or_(pc.less(values, self.min_value), pc.greater(values, self.max_value))
        if self.min_value != float("-inf"):  # the upper-bound twin leaves NaN to this check
            out = pc.or_(out, pc.is_nan(values))
        bad = pc.fill_null(out, False)
        bad_rows = pc.unique(pc.filter(rows, bad)).cast(pa.int64())
        if len(bad_rows) == 0:
            return None
        bad_rows = pc.take(bad_rows, pc.sort_indices(bad_rows))
        first = pc.indices_nonzero(bad)[:_EXAMPLES]  # type: ignore[attr-defined]
        examples = [{n: v} for n, v in zip(pc.take(names, first).to_pylist(), pc.take(values, first).to_pylist(), strict=True)]
        return Found(len(bad_rows), bad_rows, examples)

    def frame(self, data: pa.Table, rows: pa.Array) -> Any:
        import pandas as pd

        rows = rows[:GE_MAX_ROWS]
        sub = data.select([self._source_columns()[0]]).take(rows)
        flat_rows, _, values = self._flat(sub)
        out = pc.fill_null(pc.or_(pc.is_nan(values), pc.greater(values, self.max_value)), False)
        t = pa.table({"r": flat_rows, "v": pc.if_else(out, float("-inf"), values)})
        mins = t.group_by("r").aggregate([("v", "min")]).sort_by("r")
        out = np.full(len(rows), np.nan)
        out[mins.column("r").to_numpy()] = mins.column("v_min").to_numpy()
        return pd.DataFrame({self._derived: out})

    def expectation(self, gxe: Any) -> Any:
        # GX sees each row's smallest quantity; an oversized one is exact in the pyarrow pass.
        return gxe.ExpectColumnValuesToBeBetween(column=self._derived, min_value=self.min_value)

    def ge_examples(self, values: list[Any]) -> list[Any]:
        return []  # GX sees each row's smallest quantity; pyarrow's examples name the resource

    def describe(self, count: int, examples: list[Any], detail: str) -> str:
        s = "s" if count != 1 else ""
        if self.min_value == float("-inf"):
            return f"{count} row{s} with a quantity above {self.max_value:g} (see `limits.max_quantity`){_eg(examples)}"
        return f"{count} row{s} with a quantity below {self.min_value:g} or NaN{_eg(examples)}"


_MIX = np.uint64(0x9E3779B97F4A7C15)
_NULL_CODE = -(2**62)


def _codes(col: pa.ChunkedArray) -> np.ndarray:
    """A uint64 per row that is equal exactly when the values are (nulls included)."""
    arr = col.combine_chunks()
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type) or pa.types.is_binary(arr.type):
        return pc.dictionary_encode(arr, null_encoding="encode").indices.to_numpy(zero_copy_only=False).astype(np.uint64)
    if pa.types.is_timestamp(arr.type) or pa.types.is_date(arr.type):
        arr = arr.cast(pa.int64())
    if pa.types.is_floating(arr.type):
        arr = arr.cast(pa.float64()).view(pa.int64())
    arr = pc.fill_null(arr.cast(pa.int64()), _NULL_CODE)
    return arr.to_numpy(zero_copy_only=False).view(np.uint64)


def _row_hashes(keys: pa.Table) -> np.ndarray:
    h = np.zeros(keys.num_rows, np.uint64)
    for name in keys.column_names:
        h = (h * _MIX) ^ (_codes(keys.column(name)) + _MIX)  # uint64 arithmetic wraps, as a hash should
        h ^= h >> np.uint64(29)
    return h


def _map_items(maps: pa.Array) -> tuple[np.ndarray, pa.Array, pa.Array]:
    """(parent index, key, value) of every entry of a map array.

    Computed from the offsets: pyarrow 26's list kernels abort the process on map arrays.
    """
    if isinstance(maps, pa.ChunkedArray):
        maps = maps.combine_chunks()
    offsets = maps.offsets.to_numpy()
    parents = np.repeat(np.arange(len(maps)), np.diff(offsets))
    lo, hi = int(offsets[0]), int(offsets[-1])
    return parents, maps.keys.slice(lo, hi - lo), maps.items.slice(lo, hi - lo)


CHECK_KINDS: dict[str, type[Check]] = {
    c.kind: c for c in (NotNull, InRange, InSet, UniqueKey, PairOrdered, QuantitiesInRange)
}


@dataclass(frozen=True)
class UniqueValue(UniqueKey):
    """A key (e.g. ``(snapshot_ts, uid)``) unique within the batch, reported by the rows that share
    it: ``show`` names the columns that identify each of those rows (``namespace``, ``pod``)."""

    show: tuple[str, ...] = ()
    kind: ClassVar[str] = "unique_value"

    @property
    def label(self) -> str:
        return self.key[-1]

    def find(self, data: pa.Table) -> Found | None:
        found = super().find(data)
        if found is None or not self.show:
            return found
        rows = data.select([*self.key, *self.show]).take(found.rows[:200]).to_pylist()
        groups: dict[Any, list[str]] = {}
        for r in rows:
            groups.setdefault(r[self.key[-1]], []).append("/".join(str(r[c]) for c in self.show))
        examples = [f"{self.key[-1]} {k!r} held by {' and '.join(v)}" for k, v in list(groups.items())[:_EXAMPLES]]
        return Found(found.count, found.rows, examples, found.detail)

    def ge_examples(self, values: list[Any]) -> list[Any]:
        return []

    def describe(self, count: int, examples: list[Any], detail: str) -> str:
        return f"{count} rows share a {self.key[-1]} ({detail}): " + "; ".join(str(e) for e in examples)


@dataclass(frozen=True)
class TimeInRange(_OneColumn):
    """``min_value <= t < max_value`` for a timestamp column (null is not checked)."""

    min_value: Any = None
    max_value: Any = None
    kind: ClassVar[str] = "time_in_range"

    def find(self, data: pa.Table) -> Found | None:
        col = data.column(self.column)
        parts = []
        if self.min_value is not None:
            parts.append(pc.less(col, pa.scalar(self.min_value, col.type)))
        if self.max_value is not None:
            parts.append(pc.greater_equal(col, pa.scalar(self.max_value, col.type)))
        if not parts:
            return None
        mask = parts[0] if len(parts) == 1 else pc.or_(parts[0], parts[1])
        mask = pc.fill_null(mask, False)
        if not pc.any(mask).as_py():
            return None
        rows = _rows_of(mask)
        return Found(len(rows), rows, _first_distinct(col.take(rows[:50]).to_pylist()))

    def expectation(self, gxe: Any) -> Any:
        lo = None if self.min_value is None else self.min_value.replace(tzinfo=None)
        hi = None if self.max_value is None else self.max_value.replace(tzinfo=None)
        return gxe.ExpectColumnValuesToBeBetween(column=self.column, min_value=lo, max_value=hi, strict_max=True)

    def ge_examples(self, values: list[Any]) -> list[Any]:
        return []

    def describe(self, count: int, examples: list[Any], detail: str) -> str:
        s = "s" if count != 1 else ""
        lo = format_value(self.min_value) if self.min_value is not None else "-inf"
        hi = format_value(self.max_value) if self.max_value is not None else "+inf"
        return f"{count} time{s} outside [{lo}, {hi}) (see the `limits` settings){_eg(examples)}"


@dataclass(frozen=True)
class MapValueLength(_OneColumn):
    """Every value of a string map (labels) is at most ``max_chars`` long."""

    max_chars: int = 63
    kind: ClassVar[str] = "map_value_length"

    @property
    def columns(self) -> tuple[str, ...]:
        return (self._derived,)

    @property
    def _derived(self) -> str:
        return f"{self.column}_longest"

    def _source_columns(self) -> tuple[str, ...]:
        return (self.column,)

    def _longest(self, data: pa.Table) -> np.ndarray:
        parents, keys, values = _map_items(data.column(self.column))
        lengths = pc.fill_null(pc.utf8_length(values), 0).to_numpy(zero_copy_only=False)
        out = np.zeros(data.num_rows, dtype=np.int64)
        if len(lengths):
            np.maximum.at(out, parents, lengths)
        return out

    def find(self, data: pa.Table) -> Found | None:
        longest = self._longest(data)
        bad = np.flatnonzero(longest > self.max_chars)
        if len(bad) == 0:
            return None
        parents, keys, values = _map_items(data.column(self.column))
        lengths = pc.fill_null(pc.utf8_length(values), 0).to_numpy(zero_copy_only=False)
        first = np.flatnonzero(lengths > self.max_chars)[:_EXAMPLES]
        examples = [f"{keys[int(i)].as_py()}=<{int(lengths[i])} characters>" for i in first]
        return Found(len(bad), pa.array(bad.astype(np.int64)), examples)

    def frame(self, data: pa.Table, rows: pa.Array) -> Any:
        import pandas as pd

        sub = data.select([self.column]).take(rows[:GE_MAX_ROWS])
        return pd.DataFrame({self._derived: self._longest(sub)})

    def expectation(self, gxe: Any) -> Any:
        return gxe.ExpectColumnValuesToBeBetween(column=self._derived, max_value=self.max_chars)

    def ge_examples(self, values: list[Any]) -> list[Any]:
        return []

    def describe(self, count: int, examples: list[Any], detail: str) -> str:
        s = "s" if count != 1 else ""
        return f"{count} row{s} with a value longer than {self.max_chars} characters{_eg(examples)}"


@dataclass(frozen=True)
class ResourceQuantities(Check):
    """Device resources in the containers' requests/limits maps: whole devices (``nvidia.com/gpu``)
    are whole numbers in ``[0, max_whole]``; ``nvidia.com/mig-<profile>`` names a known profile."""

    column: str  # "containers.requests" or a node's "capacity"
    whole: tuple[str, ...] = ()
    max_whole: float = 64
    mig_profiles: tuple[str, ...] = ()
    kind: ClassVar[str] = "resource_quantities"

    @property
    def label(self) -> str:
        return self.column

    @property
    def columns(self) -> tuple[str, ...]:
        return (self._derived,)

    @property
    def _derived(self) -> str:
        return self.column.replace(".", "_") + "_bad_resources"

    def _source_columns(self) -> tuple[str, ...]:
        return (self.column.split(".")[0],)

    def _bad(self, data: pa.Table) -> tuple[np.ndarray, list[str]]:
        rows, names, values = QuantitiesInRange(self.column)._flat(data)
        rows_np = np.asarray(rows.to_numpy(zero_copy_only=False))
        names_l, values_np = names.to_pylist(), values.to_numpy(zero_copy_only=False)
        bad_rows: list[int] = []
        examples: list[str] = []
        for i, (name, v) in enumerate(zip(names_l, values_np, strict=True)):
            why = None
            if name in self.whole and v == v and v >= 0 and (v != np.floor(v) or v > self.max_whole):
                why = f"{name}: {format_value(float(v))} is not a whole number of devices in [0, {self.max_whole:g}]"
            elif name and name.startswith("nvidia.com/mig-") and self.mig_profiles and \
                    name.removeprefix("nvidia.com/mig-") not in self.mig_profiles:
                why = f"{name}: unknown MIG profile {name.removeprefix('nvidia.com/mig-')!r} (known: seeds/mig_profiles.csv)"
            if why:
                bad_rows.append(int(rows_np[i]))
                if len(examples) < _EXAMPLES and why not in examples:
                    examples.append(why)
        return np.unique(np.array(bad_rows, dtype=np.int64)), examples

    def find(self, data: pa.Table) -> Found | None:
        if not self.whole and not self.mig_profiles:
            return None
        values = QuantitiesInRange(self.column)._values(data)
        if len(values) == 0:
            return None
        bad, examples = self._bad(data)
        if len(bad) == 0:
            return None
        return Found(len(bad), pa.array(bad), examples)

    def frame(self, data: pa.Table, rows: pa.Array) -> Any:
        import pandas as pd

        sub = data.select([self._source_columns()[0]]).take(rows[:GE_MAX_ROWS])
        bad, _ = self._bad(sub)
        flag = np.zeros(sub.num_rows, dtype=np.int64)
        flag[bad] = 1
        return pd.DataFrame({self._derived: flag})

    def expectation(self, gxe: Any) -> Any:
        return gxe.ExpectColumnValuesToBeBetween(column=self._derived, max_value=0)

    def ge_examples(self, values: list[Any]) -> list[Any]:
        return []

    def describe(self, count: int, examples: list[Any], detail: str) -> str:
        s = "s" if count != 1 else ""
        return f"{count} row{s} with an invalid device request: " + "; ".join(str(e) for e in examples)


CHECK_KINDS.update({c.kind: c for c in (UniqueValue, TimeInRange, MapValueLength, ResourceQuantities)})
