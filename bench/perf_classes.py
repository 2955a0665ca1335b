"""Where a process's CPU went, by class of work, from a ``perf record`` of it (sampled CPU time, kernel
included): DuckDB's write compression, fresh pages from the kernel, hash aggregates and joins, dbt's Python...

    perf record -e cpu-clock -F 99 -o /tmp/build.perf -- python -m bench.profile_build <home> --full
    python -m bench.perf_classes /tmp/build.perf [--top 15]

Counts samples per symbol (``perf report -n``), so the shares add up to 100 %. The classes are regular
expressions over the shared object and symbol; what none names is "other". Needs Debian's linux-perf.
"""

from __future__ import annotations

import argparse
import re
import subprocess
from collections import Counter

CLASSES: dict[str, str] = {
    # compressing what is written (and the column statistics kept as it is written); not the scans and
    # decoders that read compressed data back (RLEScan, DictionaryDecoder::Read, CompressedStringScanState...)
    "DuckDB write compression (analyse + compress)":
        r"^(?!.*(Scan|Decoder|Read|read[A-Z]|[Dd]ecompress|CopyCompressed|DictionaryBuffer)).*"
        r"(Compress|Analyze|duckdb_zstd|TryEncode|DistinctStatistics|Utf8Proc)",
    "kernel: fresh pages (clear, fault, cgroup charge)":
        r"\[k\].*(clear_page|page_fault|memcg|pte_|folio_add|lru|rmqueue|alloc_pages|free_pages|zap_|release_pages)",
    "kernel: file I/O copies": r"\[k\].*(copy_folio|_copy_to_iter|copy_user)",
    "DuckDB hash aggregate": r"GroupedAggregateHashTable|RowOperations",
    "DuckDB hash join": r"JoinHashTable|ScanStructure",
    "hashing": r"CombineHash|VectorOperations::Hash",
    "DuckDB string storage scan / append": r"StringScan|StringAppend|StringSegment",
    "memcmp (string keys)": r"memcmp",
    "memmove / memset": r"memmove|memset|memcpy",
    "malloc (libc)": r"libc.*(malloc|_int_free|cfree|unlink_chunk|malloc_consolidate)",
    "Python (dbt)": r"libpython",
}


def sample_rows(perf_data: str) -> list[tuple[int, str]]:
    """(samples, 'dso symbol') per symbol of the recording."""
    out = subprocess.run(["perf", "report", "-i", perf_data, "--stdio", "-n", "--sort", "dso,symbol",
                          "--percent-limit", "0"], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        m = re.match(r"\s*[\d.]+%\s+(\d+)\s+(.*\S)", line)
        if m and not line.lstrip().startswith("#"):
            rows.append((int(m.group(1)), re.sub(r"\s{2,}", " ", m.group(2))))
    return rows


def classify(rows: list[tuple[int, str]]) -> Counter:
    counts: Counter = Counter()
    for n, label in rows:
        name = next((c for c, rx in CLASSES.items() if re.search(rx, label)), "other")
        counts[name] += n
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("perf_data")
    ap.add_argument("--top", type=int, default=12, help="also list the N largest symbols")
    args = ap.parse_args()
    rows = sample_rows(args.perf_data)
    total = sum(n for n, _ in rows) or 1
    print(f"{total:,} samples")
    for name, n in classify(rows).most_common():
        print(f"  {100 * n / total:5.1f} %  {name}")
    print("largest symbols:")
    for n, label in sorted(rows, reverse=True)[: args.top]:
        print(f"  {100 * n / total:5.1f} %  {label[:110]}")


if __name__ == "__main__":
    main()
