"""Typed settings from a YAML file and ``GPUFINOPS_*`` environment variables.

Built once in the CLI layer and passed down; there is no global singleton.
Precedence (highest first): explicit keyword arguments, environment, YAML file, defaults.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, SecretStr
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from gpufinops.errors import ConfigError

__all__ = ["CostSettings", "AttributionSettings", "SourceConfig", "Settings", "load_settings", "config_section"]


class CostSettings(BaseModel):
    """How node prices are split and shared costs distributed (DESIGN §3 Cost)."""

    # residual: GPU part = price − vCPU × r_cpu − GiB × r_mem (seeds/reference_rates.csv), falling
    # back to the weights below residual_floor_fraction of the price; weights: GPU:vCPU:GiB weights.
    split_method: Literal["residual", "weights"] = "residual"
    residual_floor_fraction: float = Field(0.1, ge=0.0, lt=1.0)
    gpu_weight: float = 9.0
    vcpu_weight: float = 0.9
    gib_weight: float = 0.1
    shared_namespaces: list[str] = Field(
        default_factory=lambda: ["kube-system", "gpu-operator", "monitoring", "ingress-nginx"]
    )
    # $/h per cluster for fixed overheads (control plane, load balancers), keyed by cluster name;
    # the key "*" applies to every cluster without its own entry.
    fixed_overhead_usd_per_hour: dict[str, float] = Field(default_factory=lambda: {"*": 0.10})
    shared_cost_method: Literal["proportional", "even", "separate"] = "proportional"
    distribute_unallocated: bool = False


class AttributionSettings(BaseModel):
    team_label: str = "team"
    tenant_label: str = "tenant"


class SourceConfig(BaseModel):
    """One scheduled source for ``gpufinops ingest all`` (a list of these under ``sources:``)."""

    kind: Literal["k8s", "dcgm", "usage", "prices", "billing"]
    cluster: str | None = None
    prometheus_url: str | None = None
    kubeconfig: Path | None = None
    context: str | None = None
    file: Path | None = None
    format: str | None = None
    step_s: int = 60
    # Prometheus sources start from their watermark; without one, from now minus this lookback.
    lookback_s: int = 3600


class Settings(BaseSettings):
    """Everything configurable. ``home`` holds the lake, the warehouse and the app DB."""

    model_config = SettingsConfigDict(
        env_prefix="GPUFINOPS_", env_nested_delimiter="__", extra="ignore"
    )

    home: Path = Path("./var")
    config: Path | None = None
    snapshot_interval_s: int = 60
    coverage_cap_factor: int = 3
    cost: CostSettings = Field(default_factory=CostSettings)
    attribution: AttributionSettings = Field(default_factory=AttributionSettings)
    app_db_url: str | None = None
    prometheus_url: str | None = None
    prometheus_token: SecretStr | None = None
    dq_on_failure: Literal["fail", "quarantine"] = "fail"
    sources: list[SourceConfig] = Field(default_factory=list)
    # YAML change policy (gates, approvers, windows); None = the packaged changes/default_policy.yaml.
    change_policy: Path | None = None

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
        import os

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
        return data


def load_settings(**overrides: Any) -> Settings:
    """Build settings; ``overrides`` whose value is None are ignored."""
    from pydantic import ValidationError

    kwargs = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings(**kwargs)
    except ValidationError as exc:
        raise ConfigError(f"invalid settings: {exc}") from exc


def config_section(settings: Settings, key: str) -> dict[str, Any]:
    """The mapping under ``key`` in the YAML config file, or {} when there is no file or section.

    The faces keep their own sections (``api:``, ``dashboards:``, ``reports:``) beside the kernel's keys,
    which ``Settings`` ignores."""
    import os

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
