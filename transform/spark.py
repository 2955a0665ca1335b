"""The Spark engine: the dbt project on Apache Spark (dbt-spark, ``method: session``), DuckDB views over
the marts it writes.

``gpufinops build --engine spark`` runs the same models as DuckDB does (every engine-specific construct is
an ``adapter.dispatch`` macro, macros/portable.sql) in a local Spark session this module starts in the
build's own process, so that dbt-spark's session connection (``SparkSession.builder.getOrCreate()``)
picks up its settings. The tables are Parquet in ``<home>/spark/warehouse`` (Hive metastore: Derby in
``<home>/spark/metastore``). Spark SQL cannot list files, so the lake is listed here (Hadoop's
FileSystem: a local folder or object storage alike) and handed to dbt as var ``lake_files``.

Serving stays embedded: :func:`write_serving_views` makes a DuckDB file whose views read the Parquet
files of the Spark-built tables; transform.runner publishes it as the new version of
``Settings.warehouse_path``, so the read model (gpufinops/warehouse.py) opens it like a DuckDB build.
See docs/spark.md.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from gpufinops.settings import Settings
from ingest.rollups import ROLLUPS

__all__ = ["LANDING_TABLES", "SPARK_TARGET", "enable_session_python_models", "lake_listing", "prepare_build",
           "spark_dirs", "spark_session", "spark_tables", "spark_vars", "write_serving_views"]

SPARK_TARGET = "spark"  # the profiles.yml target (method: session)
SPARK_SCHEMA = "gpufinops"
# the landing tables and every rollup the lake writer keeps beside them (ingest/rollups.py)
LANDING_TABLES = ("k8s_nodes", "k8s_pods", "k8s_namespaces", "gpu_samples", "container_usage", "prices",
                  "billing_focus", "serving_requests", "applied_changes",
                  *(r.table for rs in ROLLUPS.values() for r in rs))

# Session settings the models rely on (docs/spark.md): UTC, naive timestamps (as DuckDB's), Parquet
# files DuckDB can read (INT64 micros, not INT96), the lake's files unioned by name; small: 2 cores.
_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.timestampType": "TIMESTAMP_NTZ",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.parquet.mergeSchema": "true",
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.adaptive.enabled": "true",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.catalogImplementation": "hive",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.driver.extraJavaOptions": "-Duser.timezone=UTC -Dderby.stream.error.file=/dev/null",
}


def spark_dirs(settings: Settings) -> dict[str, Path]:
    root = Path(settings.home).resolve() / "spark"
    return {"root": root, "warehouse": root / "warehouse", "metastore": root / "metastore"}


def spark_session(settings: Settings, *, master: str | None = None, driver_memory: str | None = None) -> Any:
    """The process's local Spark session with the settings the models need (created once; a second
    call returns the same session)."""
    from pyspark.sql import SparkSession

    dirs = spark_dirs(settings)
    dirs["root"].mkdir(parents=True, exist_ok=True)
    builder = SparkSession.builder.appName("gpufinops").master(
        master or os.environ.get("GPUFINOPS_SPARK_MASTER", "local[2]"))
    conf = dict(_CONF)
    conf["spark.driver.memory"] = driver_memory or os.environ.get("GPUFINOPS_SPARK_DRIVER_MEMORY", "2g")
    conf["spark.sql.warehouse.dir"] = str(dirs["warehouse"])
    conf["spark.hadoop.javax.jdo.option.ConnectionURL"] = f"jdbc:derby:;databaseName={dirs['metastore']};create=true"
    conf["spark.local.dir"] = str(dirs["root"] / "tmp")
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.enableHiveSupport().getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def lake_listing(spark: Any, lake_root: str | Path) -> dict[str, list[str]]:
    """{landing table: its Parquet files} under ``<lake_root>/<table>/cluster=*/day=*/``, listed through
    the session's Hadoop FileSystem (so ``s3a://``, ``gs://``, ``abfss://`` roots work as local ones)."""
    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    root = str(lake_root).rstrip("/")
    out: dict[str, list[str]] = {}
    for table in LANDING_TABLES:
        pattern = jvm.org.apache.hadoop.fs.Path(f"{root}/{table}/cluster=*/day=*/*.parquet")
        statuses = pattern.getFileSystem(conf).globStatus(pattern) or []
        files = sorted(_plain(str(s.getPath().toString())) for s in statuses if s.isFile())
        out[table] = files
    return out


def _plain(uri: str) -> str:
    return uri[len("file:"):] if uri.startswith("file:/") and not uri.startswith("file://") else uri.removeprefix("file://")


def spark_vars(settings: Settings, spark: Any) -> dict[str, Any]:
    """The dbt vars only the Spark target needs."""
    return {"lake_files": lake_listing(spark, Path(settings.lake_dir).resolve())}


def spark_env(settings: Settings) -> dict[str, str]:
    return {"GPUFINOPS_SPARK_SCHEMA": SPARK_SCHEMA}


def spark_tables(spark: Any, schema: str = SPARK_SCHEMA) -> dict[str, str]:
    """{table: location} of the Parquet tables dbt built in ``schema`` (views are left out)."""
    out: dict[str, str] = {}
    if not spark.catalog.databaseExists(schema):
        return out
    for t in spark.catalog.listTables(schema):
        if t.tableType == "VIEW" or t.isTemporary:
            continue
        rows = spark.sql(f"describe formatted `{schema}`.`{t.name}`").collect()
        info = {r[0].strip(): (r[1] or "").strip() for r in rows if r[0]}
        out[t.name] = _plain(info.get("Location", ""))
    return out


def write_serving_views(spark: Any, duckdb_path: str | Path, *, schema: str = SPARK_SCHEMA,
                        tables: list[str] | None = None) -> Path:
    """A DuckDB file at ``duckdb_path`` with one view per Spark-built table (``main.<table>``), each
    reading that table's Parquet files where Spark wrote them, with Spark's column order and types.
    The file is written beside and renamed into place, so a reader never sees a half-made one; the
    views hold no data (rebuild the Spark tables and the views see the new files)."""
    import duckdb

    located = spark_tables(spark, schema)
    names = sorted(tables) if tables is not None else sorted(located)
    target = Path(duckdb_path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    con = duckdb.connect(str(tmp))
    try:
        con.execute("set TimeZone = 'UTC'")
        for name in names:
            loc = located[name]
            fields = spark.table(f"`{schema}`.`{name}`").schema.fields
            parts = {c.name for c in spark.catalog.listColumns(f"`{schema}`.`{name}`") if c.isPartition}
            cols = ", ".join(_duck_col(f.name, f.dataType, f.name in parts) for f in fields)
            glob = f"{loc}/**/*.parquet" if parts else f"{loc}/*.parquet"
            src = (f"read_parquet('{_q(glob)}', hive_partitioning = {'true' if parts else 'false'}, union_by_name = true"
                   + (", hive_types_autocast = false" if parts else "") + ")")
            con.execute(f'create or replace view "{name}" as select {cols} from {src}')
        con.execute("checkpoint")
    finally:
        con.close()
    os.replace(tmp, target)
    return target


def _q(s: str) -> str:
    return s.replace("'", "''")


def _duck_type(dtype: Any) -> str:
    name = dtype.typeName()
    return {
        "string": "varchar", "integer": "integer", "long": "bigint", "double": "double", "float": "float",
        "boolean": "boolean", "date": "date", "timestamp_ntz": "timestamp", "timestamp": "timestamp with time zone",
        "short": "smallint", "byte": "tinyint",
    }.get(name, "varchar")


def _duck_col(name: str, dtype: Any, partition: bool) -> str:
    quoted = '"' + name.replace('"', '""') + '"'
    if not partition:
        if dtype.typeName() == "timestamp":
            # Spark's local-time timestamps (date_trunc & co. return them) are UTC instants here: serve
            # them naive, as DuckDB builds them, whatever the reader's time zone
            return f"make_timestamp(epoch_us({quoted})) as {quoted}"
        return quoted
    # a Hive partition value is the folder name's text (Spark escapes ':' as %3A)
    text = f"replace(replace({quoted}, '%3A', ':'), '%20', ' ')"
    return f"cast({text} as {_duck_type(dtype)}) as {quoted}"


class SessionPythonJobHelper:
    """Runs a dbt Python model's compiled code in this process's Spark session (dbt-spark ships only
    Databricks submission helpers; this is the ``submission_method: session`` the capacity mart's
    Spark config names). The compiled code defines ``model(dbt, session)`` and writes its result
    with ``saveAsTable`` through the global ``spark``."""

    def __init__(self, parsed_model: dict, credentials: Any) -> None:
        self.identifier = str(parsed_model.get("alias") or parsed_model.get("name") or "python_model")

    def submit(self, compiled_code: str) -> None:
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.getOrCreate()
        code = compile(compiled_code, f"<dbt python model {self.identifier}>", "exec")
        exec(code, {"spark": spark, "__name__": f"dbt_model_{self.identifier}"})  # noqa: S102 - dbt's compiled model


def enable_session_python_models() -> None:
    """Adds the ``session`` submission method to dbt-spark (idempotent)."""
    from dbt.adapters.spark.impl import SparkAdapter

    if getattr(SparkAdapter, "_gpufinops_session_helper", False):
        return
    base = SparkAdapter.python_submission_helpers.fget  # type: ignore[attr-defined]  # a property

    def helpers(self: Any) -> dict[str, Any]:
        return {**base(self), "session": SessionPythonJobHelper}

    SparkAdapter.python_submission_helpers = property(helpers)  # type: ignore[method-assign,assignment]
    SparkAdapter._gpufinops_session_helper = True  # type: ignore[attr-defined]


def prepare_build(settings: Settings) -> tuple[dict[str, Any], dict[str, str], Any]:
    """Starts the session and returns (dbt vars, environment, session) for a Spark build."""
    spark = spark_session(settings)
    enable_session_python_models()
    return spark_vars(settings, spark), spark_env(settings), spark
