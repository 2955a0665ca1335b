"""Typed settings of the Kubernetes ingester (env ``GPUFINOPS_K8S_*``; CLI options override)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from gpufinops.errors import ConfigError

__all__ = ["DEFAULT_OWNER_RESOURCES", "K8sSettings", "OwnerResource", "parse_duration"]


class OwnerResource(BaseModel):
    """A namespaced resource listed only to resolve pod owners (``apps/v1`` ``replicasets``)."""

    group: str = ""  # "" = core
    version: str = "v1"
    plural: str
    kind: str
    # Required resources fail the snapshot when they cannot be listed; optional ones (CRDs that
    # may not be installed) are skipped with a warning.
    required: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def resource(self) -> str:
        """``replicasets.apps``: how RBAC and kubectl name it."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


DEFAULT_OWNER_RESOURCES: tuple[OwnerResource, ...] = (
    OwnerResource(group="apps", plural="replicasets", kind="ReplicaSet", required=True),
    OwnerResource(group="batch", plural="jobs", kind="Job", required=True),
    # RayJob -> RayCluster -> pods: without the RayClusters the chain stops at RayCluster.
    OwnerResource(group="ray.io", plural="rayclusters", kind="RayCluster"),
    # Kubeflow Notebook -> StatefulSet -> pods.
    OwnerResource(group="apps", plural="statefulsets", kind="StatefulSet"),
)


class K8sSettings(BaseSettings):
    """How to reach the API server and how hard to try.

    Build it with :meth:`load`: CLI options > ``GPUFINOPS_K8S_*`` env > the ``k8s:`` section of the
    YAML config file (``--config`` / ``GPUFINOPS_CONFIG``) > defaults.
    """

    model_config = SettingsConfigDict(env_prefix="GPUFINOPS_K8S_", extra="ignore")

    kubeconfig: Path | None = None
    context: str | None = None
    # None = autodetect: in-cluster when KUBERNETES_SERVICE_HOST is set and no kubeconfig is given.
    in_cluster: bool | None = None
    page_size: int = Field(default=500, ge=1, le=100_000)
    connect_timeout_s: float = Field(default=5.0, gt=0)
    read_timeout_s: float = Field(default=60.0, gt=0)
    max_attempts: int = Field(default=6, ge=1)  # per request, for 429 / 5xx / timeouts
    backoff_base_s: float = Field(default=0.5, ge=0)
    backoff_max_s: float = Field(default=30.0, ge=0)
    max_list_restarts: int = Field(default=3, ge=0)  # after 410 Gone (expired continue token)
    owner_resources: list[OwnerResource] = Field(default_factory=lambda: list(DEFAULT_OWNER_RESOURCES))

    @classmethod
    def load(cls, config_file: Path | None = None, **overrides: Any) -> K8sSettings:
        """Merge the sources in precedence order; ``overrides`` that are None are ignored."""
        try:
            from_env = cls()
            merged = {
                **_yaml_section(config_file),
                **{k: getattr(from_env, k) for k in from_env.model_fields_set},
                **{k: v for k, v in overrides.items() if v is not None},
            }
            return cls(**merged)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
            raise ConfigError(f"invalid Kubernetes settings (k8s.* / GPUFINOPS_K8S_* / CLI): {problems}") from exc

    @field_validator("kubeconfig")
    @classmethod
    def _expand(cls, v: Path | None) -> Path | None:
        return v.expanduser() if v is not None else None


def _yaml_section(config_file: Path | None) -> dict[str, Any]:
    if config_file is None or not Path(config_file).is_file():
        return {}  # the kernel's settings already complain about a missing config file
    try:
        doc = yaml.safe_load(Path(config_file).read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {config_file} is not valid YAML: {exc}") from exc
    section = doc.get("k8s") if isinstance(doc, dict) else None
    if section is None:
        return {}
    if not isinstance(section, dict):
        raise ConfigError(f"config file {config_file}: 'k8s' must be a mapping")
    return section


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str, *, option: str = "duration") -> float:
    """``60s``, ``5m``, ``1h``, ``1.5h`` or plain seconds to seconds (> 0)."""
    m = _DURATION.match(text or "")
    if m is None:
        raise ConfigError(f"{option}: invalid duration {text!r} (use e.g. 30s, 5m, 1h)")
    seconds = float(m[1]) * _UNIT_S[m[2] or "s"]
    if seconds <= 0:
        raise ConfigError(f"{option}: duration {text!r} must be positive")
    return seconds
