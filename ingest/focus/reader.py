"""Read one FOCUS bill file (CSV, optionally gzipped, or Parquet) into typed ``billing_focus`` rows.

Typing rules, the same for every version:
- the literal string ``NULL`` and empty fields are nulls;
- times with a zone offset (``Z``, ``+02:00``) are converted to UTC, times without one are UTC;
- decimals become float64;
- ``Tags`` is a JSON object (-> map of strings; non-string values keep their JSON text);
- columns the landing table does not type are kept, per row, in ``extra_columns`` (a JSON object
  of their text values);
- ``row_hash`` is a sha256 of the row's typed values and extras; a repeated identical row gets
  ``#2``, ``#3``, ... appended so every row of a file has its own key.
A bad value raises :class:`InputError` naming the file, the 1-based data row and the column.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from gpufinops.errors import InputError
from ingest.focus.spec import (
    FLOAT_COLUMNS,
    MAP_COLUMNS,
    TIME_COLUMNS,
    detect_version,
    missing_mandatory,
    provider_column,
)
from ingest.schema import TS, get_table

__all__ = ["FocusFile", "read_focus_file", "file_sha256", "TYPED_COLUMNS", "NOT_NULL_COLUMNS"]

_META = ("focus_version", "extra_columns", "source_file", "file_hash", "row_hash")
_SCHEMA = get_table("billing_focus").schema
TYPED_COLUMNS = tuple(f.name for f in _SCHEMA if f.name not in _META)
# Needed downstream (the lake's required columns and the run window); FOCUS forbids nulls here too.
NOT_NULL_COLUMNS = ("BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd",
                    "BilledCost", "EffectiveCost", "ProviderName")
_NULLS = pa.array(["", "NULL"])
_ZONED = r"([Zz]|[+-]\d{2}:?\d{2})$"
_STR_MAP = pa.map_(pa.string(), pa.string())


@dataclass
class FocusFile:
    path: Path
    version: str
    file_hash: str
    table: pa.Table  # the billing_focus landing columns

    @property
    def rows(self) -> int:
        return self.table.num_rows


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_focus_file(path: Path | str, *, version: str | None = None) -> FocusFile:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such FOCUS file")
    raw = _read_parquet(path) if _is_parquet(path) else _read_csv(path)
    ver = detect_version(raw.column_names, declared=version, where=str(path))
    missing = missing_mandatory(raw.column_names, ver)
    if missing:
        raise InputError(f"{path}: FOCUS {ver} mandatory column(s) missing: {', '.join(missing)}")
    prov = provider_column(raw.column_names, ver)
    sources = {name: name for name in TYPED_COLUMNS if name in raw.column_names}
    if prov is not None:
        sources["ProviderName"] = prov
    arrays: dict[str, pa.ChunkedArray] = {}
    for name in TYPED_COLUMNS:
        target = _SCHEMA.field(name).type
        if name not in sources:
            arrays[name] = pa.chunked_array([pa.nulls(raw.num_rows, target)])
            continue
        col = raw.column(sources[name])
        arrays[name] = _typed(col, name, target, path, sources[name])
    for name in NOT_NULL_COLUMNS:
        col = arrays[name]
        if col.null_count:
            row = pc.index(pc.is_null(col), True).as_py()
            raise InputError(f"{path}: row {row + 1}, column {sources.get(name, name)}: null, but every row needs a value")
    used = set(sources.values())
    extras = [c for c in raw.column_names if c not in used]
    n = raw.num_rows
    extra_json = _extra_json(raw, extras)
    typed = pa.table(arrays)
    row_hash = _row_hashes(typed, extra_json)
    fhash = file_sha256(path)
    out = typed.append_column("focus_version", pa.array([ver] * n, pa.string()))
    out = out.append_column("extra_columns", extra_json)
    out = out.append_column("source_file", pa.array([path.name] * n, pa.string()))
    out = out.append_column("file_hash", pa.array([fhash] * n, pa.string()))
    out = out.append_column("row_hash", pa.array(row_hash, pa.string()))
    return FocusFile(path, ver, fhash, out.select(_SCHEMA.names).cast(_SCHEMA))


# -- loading --------------------------------------------------------------------------------------

def _is_parquet(path: Path) -> bool:
    if path.suffix.lower() in (".parquet", ".pq"):
        return True
    with path.open("rb") as fh:
        return fh.read(4) == b"PAR1"


def _read_parquet(path: Path) -> pa.Table:
    try:
        return pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"{path}: not a readable Parquet file: {exc}") from exc


def _read_csv(path: Path) -> pa.Table:
    opener: Callable[..., Any] = gzip.open if path.suffix.lower() == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8-sig", newline="") as fh:
            head = fh.read(1 << 16)
            fh.seek(0)
            header = next(csv.reader(fh), None)
    except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile, csv.Error) as exc:
        raise InputError(f"{path}: cannot read the CSV header: {exc}") from exc
    stripped = head.lstrip()
    if not stripped:
        raise InputError(f"{path}: empty file (no CSV header)")
    if stripped[0] in "{[":
        raise InputError(f"{path}: this is JSON, not a FOCUS bill; give the FOCUS export as CSV (header line first) or Parquet")
    if not header or not any(h.strip() for h in header):
        first = head[: len(head) - len(stripped)].count("\n") + 1
        raise InputError(f"{path}: line 1 is blank; a FOCUS CSV must start with its header line "
                         f"(the first non-blank line is line {first}): remove the blank line(s)")
    header = [h.strip() for h in header]
    dupes = sorted({h for h in header if header.count(h) > 1})
    if dupes:
        raise InputError(f"{path}: column(s) {dupes} appear more than once in the header")
    try:
        return pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(column_names=header, skip_rows=1),
            parse_options=pacsv.ParseOptions(newlines_in_values=True),
            convert_options=pacsv.ConvertOptions(column_types={h: pa.string() for h in header},
                                                 strings_can_be_null=False, quoted_strings_can_be_null=False),
        )
    except pa.ArrowInvalid as exc:
        raise InputError(f"{path}: not a readable CSV: {exc}") from exc


# -- typing ---------------------------------------------------------------------------------------

def _typed(col: pa.ChunkedArray, name: str, target: pa.DataType, path: Path, src: str) -> pa.ChunkedArray:
    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    if pa.types.is_large_string(col.type):
        col = col.cast(pa.string())
    if pa.types.is_string(col.type):
        col = _nulls_out(col)
        if name in TIME_COLUMNS:
            return _parse_times(col, path, src)
        if name in FLOAT_COLUMNS:
            return _parse_floats(col, path, src)
        if name in MAP_COLUMNS:
            return _parse_tags(col, path, src)
        return col
    # Parquet already typed.
    try:
        if name in TIME_COLUMNS:
            if pa.types.is_timestamp(col.type):
                if col.type.tz is None:
                    col = pc.assume_timezone(col.cast(pa.timestamp("us")), "UTC")
                return col.cast(TS)
            if pa.types.is_date(col.type):
                return col.cast(pa.timestamp("us")).cast(TS)
        elif name in FLOAT_COLUMNS and (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)
                                         or pa.types.is_decimal(col.type)):
            return _finite(col.cast(pa.float64()), path, src)
        elif name in MAP_COLUMNS and (pa.types.is_map(col.type) or pa.types.is_struct(col.type)):
            return _tags_from_objects(col.to_pylist(), path, src)
        elif pa.types.is_string(target):
            return col.cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise InputError(f"{path}: column {src} ({col.type}) cannot be read as {target}: {exc}") from exc
    raise InputError(f"{path}: column {src} has type {col.type}, expected {target} or text")


def _nulls_out(col: pa.ChunkedArray) -> pa.ChunkedArray:
    trimmed = pc.utf8_trim_whitespace(col)
    is_null = pc.fill_null(pc.is_in(trimmed, value_set=_NULLS), True)
    return pc.if_else(is_null, pa.scalar(None, pa.string()), trimmed)


def _parse_times(col: pa.ChunkedArray, path: Path, src: str) -> pa.ChunkedArray:
    try:
        zoned = pc.fill_null(pc.match_substring_regex(col, _ZONED), False)
        with_zone = pc.if_else(zoned, col, pa.scalar(None, pa.string())).cast(TS)
        naive = pc.if_else(zoned, pa.scalar(None, pa.string()), col).cast(pa.timestamp("us"))
        return pc.coalesce(with_zone, pc.assume_timezone(naive, "UTC"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        # Locate the bad value (or accept what Arrow alone would not, e.g. nanosecond fractions).
        return pa.chunked_array([pa.array([_time_value(v, path, i, src) for i, v in enumerate(col.to_pylist())], TS)])


def _time_value(value: str | None, path: Path, i: int, src: str) -> datetime | None:
    if value is None:
        return None
    text = value.replace("Z", "+00:00").replace("z", "+00:00")
    try:
        ts = datetime.fromisoformat(text)
    except ValueError:
        try:
            ts = datetime.combine(date.fromisoformat(text), datetime.min.time())
        except ValueError:
            raise InputError(f"{path}: row {i + 1}, column {src}: {value!r} is not an ISO-8601 time") from None
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)


def _parse_floats(col: pa.ChunkedArray, path: Path, src: str) -> pa.ChunkedArray:
    try:
        out = col.cast(pa.float64())
    except pa.ArrowInvalid:
        values = []
        for i, v in enumerate(col.to_pylist()):
            try:
                values.append(None if v is None else float(v))
            except ValueError:
                raise InputError(f"{path}: row {i + 1}, column {src}: {v!r} is not a number") from None
        out = pa.chunked_array([pa.array(values, pa.float64())])
    return _finite(out, path, src)


def _finite(col: pa.ChunkedArray, path: Path, src: str, raw: pa.ChunkedArray | None = None) -> pa.ChunkedArray:
    """Money and quantities are finite numbers: NaN and infinities are refused, naming the row."""
    bad = pc.fill_null(pc.invert(pc.is_finite(col)), False)
    if pc.any(bad).as_py():
        row = pc.index(bad, True).as_py()
        raise InputError(f"{path}: row {row + 1}, column {src}: {col[row].as_py()!r} is not a finite number")
    return col


def _parse_tags(col: pa.ChunkedArray, path: Path, src: str) -> pa.ChunkedArray:
    # Bills repeat the same few tag sets on many rows: parse each distinct text once, then take.
    uniques = pc.unique(col).drop_null()
    parsed: list[list[tuple[str, str | None]] | None] = []
    for text in uniques.to_pylist():
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            row = pc.index(col, text).as_py()
            raise InputError(f"{path}: row {row + 1}, column {src}: not valid JSON ({exc.msg}): {text[:80]!r}") from None
        if obj is not None and not isinstance(obj, dict):
            row = pc.index(col, text).as_py()
            raise InputError(f"{path}: row {row + 1}, column {src}: a JSON object is expected, got {type(obj).__name__}")
        parsed.append(_tag_items(obj))
    return pa.array(parsed, _STR_MAP).take(pc.index_in(col, value_set=uniques))


def _tags_from_objects(values: list[Any], path: Path, src: str) -> pa.ChunkedArray:
    out: list[list[tuple[str, str | None]] | None] = []
    for i, v in enumerate(values):
        if v is None:
            out.append(None)
        elif isinstance(v, dict):
            out.append(_tag_items(v))
        elif isinstance(v, list):  # Arrow maps come back as [(key, value), ...]
            out.append(_tag_items(dict(v)))
        else:
            raise InputError(f"{path}: row {i + 1}, column {src}: tags must be an object, got {v!r}")
    return pa.chunked_array([pa.array(out, _STR_MAP)])


def _tag_items(obj: dict[str, Any] | None) -> list[tuple[str, str | None]] | None:
    if obj is None:
        return None
    return [(str(k), v if v is None or isinstance(v, str) else json.dumps(v, sort_keys=True)) for k, v in obj.items()]


# -- extras and hashes ----------------------------------------------------------------------------

def _json_values(col: pa.ChunkedArray) -> pa.ChunkedArray:
    """Each value as JSON text: a quoted, escaped string, or ``null``."""
    if pc.any(pc.fill_null(pc.match_substring_regex(col, r"[\x00-\x1f]"), False)).as_py():
        # Control characters need \uXXXX escapes: rare enough for the slow path.
        return pa.chunked_array([pa.array([json.dumps(v, ensure_ascii=False) for v in col.to_pylist()], pa.string())])
    esc = pc.replace_substring(pc.replace_substring(col, "\\", "\\\\"), '"', '\\"')
    return pc.fill_null(pc.binary_join_element_wise('"', esc, '"', ""), "null")


def _extra_json(raw: pa.Table, extras: list[str]) -> pa.ChunkedArray:
    """Per row, a JSON object of the extra columns' text values (keys sorted), or null if none."""
    n = raw.num_rows
    if not extras:
        return pa.chunked_array([pa.nulls(n, pa.string())])
    pieces: list[Any] = []
    for name in sorted(extras):
        col = raw.column(name)
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type) or pa.types.is_dictionary(col.type):
            col = _nulls_out(col.cast(pa.string()))
        else:  # typed Parquet: keep the text form, so a CSV and a Parquet copy of a bill agree
            col = pa.chunked_array([pa.array([_as_text(v) for v in col.to_pylist()], pa.string())])
        pieces.append(pc.binary_join_element_wise(json.dumps(name, ensure_ascii=False) + ":", _json_values(col), ""))
    return pc.binary_join_element_wise("{", pc.binary_join_element_wise(*pieces, ","), "}", "")


def _as_text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)


def _hash_text(col: pa.ChunkedArray) -> pa.ChunkedArray:
    """A column as text for hashing: times as epoch microseconds, tags as sorted JSON, null as NUL."""
    if pa.types.is_timestamp(col.type):
        col = col.cast(pa.int64())
    if pa.types.is_map(col.type):
        # Distinct tag sets are few: serialise each once.
        seen: dict[tuple | None, str | None] = {}
        texts = []
        for v in col.to_pylist():
            key = None if v is None else tuple(sorted(v))
            if key not in seen:
                seen[key] = None if key is None else json.dumps(list(key), ensure_ascii=False)
            texts.append(seen[key])
        col = pa.chunked_array([pa.array(texts, pa.string())])
    return pc.fill_null(col.cast(pa.string()), "\x00")


def _row_hashes(typed: pa.Table, extra_json: pa.ChunkedArray) -> list[str]:
    parts = [_hash_text(typed.column(name)) for name in TYPED_COLUMNS] + [pc.fill_null(extra_json, "\x00")]
    joined = pc.binary_join_element_wise(*parts, "\x1f")
    seen: dict[str, int] = {}
    out = []
    for text in joined.to_pylist():
        digest = hashlib.sha256(text.encode()).hexdigest()
        n = seen.get(digest, 0) + 1
        seen[digest] = n
        out.append(digest if n == 1 else f"{digest}#{n}")
    return out
