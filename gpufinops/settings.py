"""Typed settings from a YAML file and ``GPUFINOPS_*`` environment variables.

Built once in the CLI layer and passed down; there is no global singleton.
Precedence (highest first): explicit keyword arguments, environment, YAML file, defaults.
"""

from __future__ import annotations

import difflib
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, PositiveFloat, SecretStr, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from gpufinops.errors import ConfigError

__all__ = ["CostSettings", "AttributionSettings", "SourceConfig", "LimitSettings", "CurrencySettings", "Settings",
           "load_settings", "config_section", "FACE_SECTIONS"]

# Top-level YAML sections owned by other layers (each validates its own); Settings ignores them.
FACE_SECTIONS = ("api", "dashboards", "reports", "k8s", "recommender")


class _Strict(BaseModel):
    """Every settings model: unknown keys and NaN/inf are refused (so a typo never does nothing)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class CostSettings(_Strict):
    """How node prices are split and shared costs distributed (DESIGN §3 Cost)."""

    # residual: GPU part = price − vCPU × r_cpu − GiB × r_mem (seeds/reference_rates.csv), falling
    # back to the weights below residual_floor_fraction of the price; weights: GPU:vCPU:GiB weights.
    split_method: Literal["residual", "weights"] = "residual"
    residual_floor_fraction: float = Field(default=0.1, ge=0.0, lt=1.0)
    gpu_weight: float = Field(default=9.0, ge=0)
    vcpu_weight: float = Field(default=0.9, ge=0)
    gib_weight: float = Field(default=0.1, ge=0)
    shared_namespaces: list[str] = Field(
        default_factory=lambda: ["kube-system", "gpu-operator", "monitoring", "ingress-nginx"]
    )
    # $/h per cluster for fixed overheads (control plane, load balancers), keyed by cluster name;
    # the key "*" applies to every cluster without its own entry.
    fixed_overhead_usd_per_hour: dict[str, NonNegativeFloat] = Field(default_factory=lambda: {"*": 0.10})
    shared_cost_method: Literal["proportional", "even", "separate"] = "proportional"
    distribute_unallocated: bool = False


class AttributionSettings(_Strict):
    team_label: str = "team"
    tenant_label: str = "tenant"


class SourceConfig(_Strict):
    """One scheduled source for ``gpufinops ingest all`` (a list of these under ``sources:``)."""

    kind: Literal["k8s", "dcgm", "usage", "prices", "billing", "changes"]  # changes: the app DB's applied changes
    cluster: str | None = None
    prometheus_url: str | None = None
    kubeconfig: Path | None = None
    context: str | None = None
    file: Path | None = None
    format: str | None = None
    step_s: int = Field(default=60, gt=0)
    # Prometheus sources start from their watermark; without one, from now minus this lookback.
    lookback_s: int = Field(default=3600, gt=0)


class LimitSettings(_Strict):
    """The sane range of every money and quantity column, checked at ingest by the quality gate
    (:mod:`ingest.quality.suites`). A value outside it (or NaN, or infinite) is refused or
    quarantined per ``dq_on_failure``."""

    max_price_per_hour: float = Field(default=10_000.0, gt=0)  # one node's price, USD/h
    max_line_cost: float = Field(default=1e9, gt=0)  # |BilledCost|, |EffectiveCost|, ... of one FOCUS line
    max_quantity: float = Field(default=1e15, gt=0)  # a resource quantity, a FOCUS quantity, bytes
    max_gpus_per_container: int = Field(default=64, ge=1)  # nvidia.com/gpu (and other whole devices) per container
    max_label_value_chars: int = Field(default=63, ge=1)  # Kubernetes' own limit on a label value
    min_time: datetime = datetime(2000, 1, 1, tzinfo=UTC)  # samples and snapshots before this are refused


class CurrencySettings(_Strict):
    """Money is kept in USD. A price or bill row in another currency is refused unless ``rates``
    gives its USD value (1 unit = rate USD); it is then converted at ingest."""

    rates: dict[str, PositiveFloat] = Field(default_factory=dict)

    def usd_rate(self, code: str | None) -> float | None:
        """USD per unit of ``code`` (1.0 for USD; None when no rate is configured)."""
        code = (code or "USD").strip().upper()
        if code == "USD":
            return 1.0
        return {k.upper(): v for k, v in self.rates.items()}.get(code)


class Settings(BaseSettings):
    """Everything configurable. ``home`` holds the lake, the warehouse and the app DB."""

    model_config = SettingsConfigDict(
        env_prefix="GPUFINOPS_", env_nested_delimiter="__", extra="forbid", allow_inf_nan=False
    )

    home: Path = Path("./var")
    config: Path | None = None
    snapshot_interval_s: int = Field(default=60, gt=0)
    coverage_cap_factor: int = Field(default=3, ge=1)
    cost: CostSettings = Field(default_factory=CostSettings)
    attribution: AttributionSettings = Field(default_factory=AttributionSettings)
    app_db_url: str | None = None
    prometheus_url: str | None = None
    prometheus_token: SecretStr | None = None
    dq_on_failure: Literal["fail", "quarantine"] = "fail"
    # The data tests of an incremental (hourly) build: `invariants` runs the singular tests only
    # (tests/dbt: conservation per cluster-hour, showback and FOCUS sums, daily = hourly, pod keys one to
    # one) on the rebuilt window; `all` adds every generic test (unique, not-null, ranges, accepted values).
    # `build --full` and `build --all-tests` (the nightly CronJob) always run all of them.
    hourly_tests: Literal["invariants", "all"] = "invariants"
    # DuckDB's memory_limit for dbt (beyond it DuckDB spills to disk where it can): a full build, and
    # an incremental (hourly) one. 6 GB keeps the 1,000-node month's full build at a 6.5 GB peak
    # (docs/bench.md); it ran out of 6 GB while int_pod_allocation_hourly was a view evaluated four
    # times. More memory buys little time there (12 GB: 11.7 GB peak, about 10 % faster). The env
    # var GPUFINOPS_DUCKDB_MEMORY_LIMIT, when set, overrides both.
    build_memory_limit: str = "6GB"
    hourly_memory_limit: str = "6GB"
    # DuckDB's block_allocator_memory for dbt, a full build and an incremental one: memory the block
    # allocator keeps for buffers once it has touched it, instead of freeing every buffer to the C
    # allocator, which hands it back to the kernel to be mapped and zeroed again. At the full build's
    # memory limit it took the 1,000-node month's full build from ~104 to ~96 s (the kernel's share of
    # the CPU from ~32 to ~20 s) at a 6.8 GB peak (docs/bench.md). The hour keeps DuckDB's default (0):
    # at 2GB its hours were no faster and the worker's peak ~0.2 GB higher.
    # GPUFINOPS_DUCKDB_BLOCK_ALLOCATOR_MEMORY, when set, overrides both. Both settings reach DuckDB
    # through transform/duckdb_settings.py when dbt opens the warehouse, not through the profile.
    build_block_allocator_memory: str = "6GB"
    hourly_block_allocator_memory: str = "0B"
    # dbt threads of a full DuckDB build (each query runs on build_duckdb_threads of DuckDB's).
    full_build_threads: int = Field(default=2, ge=1)
    # DuckDB's threads (one pool, which every query of the invocation shares) for a full build, and for an
    # incremental one. None for the full build: the machine's cores over full_build_threads, at least 1.
    # On 2 cores that is 1: dbt's two nodes run side by side with one thread each, instead of every
    # query splitting its hash tables over two threads and merging them. The 1,000-node month's full
    # build took 142-148 instead of ~176 CPU-seconds (docs/bench.md). The hour keeps 2: its queries are
    # small and the chain is mostly one node at a time. GPUFINOPS_DUCKDB_THREADS, when set, overrides both.
    build_duckdb_threads: int | None = Field(default=None, ge=1)
    hourly_duckdb_threads: int = Field(default=2, ge=1)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    currency: CurrencySettings = Field(default_factory=CurrencySettings)
    # Which engine `gpufinops build` runs dbt on (docs/spark.md): duckdb (the warehouse file) or spark
    # (local session; Parquet tables under <home>/spark, served through DuckDB views).
    engine: Literal["duckdb", "spark"] = "duckdb"
    sources: list[SourceConfig] = Field(default_factory=list)
    # YAML change policy (gates, approvers, windows); None = the packaged changes/default_policy.yaml.
    change_policy: Path | None = None

    @field_validator("home")
    @classmethod
    def _home_is_a_folder(cls, v: Path) -> Path:
        if v.exists() and not v.is_dir():
            raise ValueError(f"{v} is a file; home must be a folder (it holds the lake, the warehouse and the app DB)")
        return v

    @property
    def lake_dir(self) -> Path:
        return self.home / "lake"

    @property
    def warehouse_path(self) -> Path:
        return self.home / "warehouse.duckdb"

    @property
    def app_db_path(self) -> Path:
        return self.home / "app.db"

    @property
    def effective_app_db_url(self) -> str:
        return self.app_db_url or f"sqlite:///{self.app_db_path}"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _YamlSource(settings_cls))


class _YamlSource(PydanticBaseSettingsSource):
    """Reads the YAML file named by ``config`` (init kwarg) or ``GPUFINOPS_CONFIG``."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        path = self.current_state.get("config") or os.environ.get("GPUFINOPS_CONFIG")
        if not path:
            return {}
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"config file {path} does not exist (set by --config or GPUFINOPS_CONFIG)")
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {path} is not valid YAML: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"config file {path} must hold a mapping at the top level")
        return {k: v for k, v in data.items() if k not in FACE_SECTIONS}


def load_settings(**overrides: Any) -> Settings:
    """Build settings; ``overrides`` whose value is None are ignored.

    Every error names the setting, where it came from (the config file, an environment variable
    or an argument) and, for an unknown key, the closest known one."""
    from pydantic import ValidationError

    origins: dict[str, str] = overrides.pop("_origins", None) or {}
    kwargs = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings(**kwargs)
    except ValidationError as exc:
        config = kwargs.get("config") or os.environ.get("GPUFINOPS_CONFIG")
        lines = [_explain(err, kwargs, config, origins) for err in exc.errors()]
        raise ConfigError("invalid settings: " + "; ".join(lines)) from None


def _explain(err: Any, kwargs: dict[str, Any], config: Any, origins: dict[str, str]) -> str:
    loc = [str(p) for p in err.get("loc", ())]
    name = ".".join(loc) or "(settings)"
    env = "GPUFINOPS_" + "__".join(loc).upper()
    if loc and loc[0] in origins:
        where = origins[loc[0]]
    elif loc and loc[0] in kwargs:
        where = "a command-line option"
    elif env in os.environ or (loc and f"GPUFINOPS_{loc[0].upper()}" in os.environ):
        where = f"environment variable {env if env in os.environ else 'GPUFINOPS_' + loc[0].upper()}"
    elif config:
        where = f"config file {config}"
    else:
        where = "the defaults"
    if err.get("type") == "extra_forbidden":
        known = _known_keys(loc[:-1])
        close = difflib.get_close_matches(loc[-1], known, n=1, cutoff=0.6) if loc else []
        hint = f"; did you mean `{'.'.join([*loc[:-1], close[0]])}`?" if close else (
            f"; known keys here: {', '.join(known)}" if known else "")
        return f"unknown setting `{name}` in {where}{hint}"
    value = err.get("input")
    shown = f" (got {value!r})" if not isinstance(value, dict | list) else ""
    return f"setting `{name}` in {where}: {err.get('msg')}{shown}"


def _known_keys(path: list[str]) -> list[str]:
    """The keys allowed under ``path`` (a dotted location in Settings)."""
    model: Any = Settings
    for part in path:
        if part.isdigit():
            continue
        field = getattr(model, "model_fields", {}).get(part)
        if field is None:
            return []
        ann = field.annotation
        args = getattr(ann, "__args__", ()) or ()
        model = next((a for a in (ann, *args) if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if model is None:
            return []
    keys = list(getattr(model, "model_fields", {}))
    return keys + list(FACE_SECTIONS) if model is Settings else keys


def config_section(settings: Settings, key: str) -> dict[str, Any]:
    """The mapping under ``key`` in the YAML config file, or {} when there is no file or section.

    The faces keep their own sections (``api:``, ``dashboards:``, ``reports:``) beside the kernel's keys,
    which ``Settings`` ignores."""
    path = settings.config or os.environ.get("GPUFINOPS_CONFIG")
    if not path:
        return {}
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc}") from exc
    section = data.get(key) if isinstance(data, dict) else None
    if section is None:
        return {}
    if not isinstance(section, dict):
        raise ConfigError(f"config file {path}: `{key}` must be a mapping")
    return section
