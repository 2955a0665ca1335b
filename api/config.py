"""Settings of the API, read from the ``api:`` section of the config file (beside the kernel's settings).

The kernel's ``Settings`` ignores unknown keys, so this section lives in the same YAML file
(``--config`` / ``GPUFINOPS_CONFIG``). ``GPUFINOPS_API_TOKENS_FILE`` overrides the tokens file.

Auth modes: ``embedded`` (bearer tokens whose salted hashes are in a YAML file, default
``<home>/api-tokens.yaml``), ``oidc`` (RS256 JWTs from the org's identity provider, verified against
its JWKS), or ``both`` (a token that looks like a JWT goes to OIDC, any other to the file).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from gpufinops.errors import ConfigError
from gpufinops.settings import Settings, config_section

__all__ = ["OidcSettings", "ApiSettings", "load_api_settings", "TOKENS_FILE_ENV"]

TOKENS_FILE_ENV = "GPUFINOPS_API_TOKENS_FILE"


class OidcSettings(BaseModel):
    """How an OIDC access token (a JWT) maps to an actor and roles."""

    issuer: str | None = None
    audience: str | None = None
    jwks_url: str | None = None
    algorithms: list[str] = Field(default_factory=lambda: ["RS256"])
    # the claim holding the user's groups (a list of strings, or one space/comma separated string)
    roles_claim: str = "groups"
    username_claim: str = "preferred_username"
    # group -> role (platform-admin | finance | team-lead:<team> | member:<team>)
    group_roles: dict[str, str] = Field(
        default_factory=lambda: {
            "gpufinops-admins": "platform-admin",
            "gpufinops-platform": "platform-admin",
            "gpufinops-finance": "finance",
        }
    )
    # a group named <prefix><team> gives team-lead:<team> / member:<team>
    team_lead_group_prefix: str = "gpufinops-lead-"
    member_group_prefix: str = "gpufinops-team-"
    leeway_s: int = Field(default=30, ge=0)
    jwks_cache_s: int = Field(default=300, ge=0)

    @property
    def configured(self) -> bool:
        return bool(self.issuer and self.audience and self.jwks_url)


class ApiSettings(BaseModel):
    auth_mode: Literal["embedded", "oidc", "both"] = "embedded"
    tokens_file: Path | None = None
    oidc: OidcSettings = Field(default_factory=OidcSettings)
    # request bodies above this many bytes get 413
    max_body_bytes: int = Field(default=64 * 1024, gt=0)
    # /metrics needs no token by default (a Prometheus scrape on the cluster network); true = platform-admin only
    metrics_require_auth: bool = False
    # the Kubernetes target of apply/rollback: a kubeconfig file and context, or in-cluster config when unset
    kubeconfig: Path | None = None
    kube_context: str | None = None
    # default window of GET /v1/workloads/{id}/cost when ?window= is absent
    default_cost_window: str = "7d"
    # worker threads the (sync) route functions run on; few threads contend less for the GIL, and the
    # warehouse and app DB queries release it while they run
    threadpool_size: int = Field(default=8, ge=1, le=256)
    # pre-serialised answers of the read endpoints kept per warehouse version (api/response_cache.py);
    # 0 turns the cache off
    response_cache_size: int = Field(default=4096, ge=0, le=1_000_000)
    # the longest a cached answer that read the app DB (the cost endpoint's registry row and open
    # recommendations) is kept: how long a write by another process (the recommender) takes to show at
    # most; this process's own writes are seen by the next request
    app_db_cache_s: float = Field(default=1.0, ge=0, le=3600)

    def tokens_path(self, settings: Settings) -> Path:
        env = os.environ.get(TOKENS_FILE_ENV)
        if env:
            return Path(env)
        return self.tokens_file or Path(settings.home) / "api-tokens.yaml"


def load_api_settings(settings: Settings, **overrides: Any) -> ApiSettings:
    data = {**config_section(settings, "api"), **{k: v for k, v in overrides.items() if v is not None}}
    try:
        api = ApiSettings(**data)
    except ValidationError as exc:
        raise ConfigError(f"invalid `api` settings: {exc}") from exc
    if api.auth_mode in ("oidc", "both") and not api.oidc.configured:
        raise ConfigError("api.auth_mode is oidc/both but api.oidc.issuer, audience and jwks_url are not all set")
    return api
