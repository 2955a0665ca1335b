"""Bearer-token auth: ``Authorization: Bearer <token>`` -> an ``Actor`` with roles.

Roles are ``platform-admin``, ``finance``, ``team-lead:<team>`` and ``member:<team>``.

* **Embedded** (the default): a YAML file of tokens (``api.tokens_file``, default
  ``<home>/api-tokens.yaml``, mode 0600) holding, per token, a name, its roles, a random salt and
  ``sha256(salt || token)``. Only hashes are stored; ``gpufinops api token create`` prints a token once.
  Tokens are 256-bit random strings, so one salted SHA-256 is enough (a slow password hash would only
  slow every request); comparison is constant-time. The file is re-read when it changes (its inode,
  mtime or size: a create or revoke replaces it), and what a presented token verified to is cached
  under the file's stamp, keyed by the token's SHA-256, so a request costs one stat and one hash; a
  revoke changes the stamp, which empties the cache, so a revoked token fails on the next request.
* **OIDC** (production): an RS256 JWT from the identity provider, verified against its JWKS with
  PyJWT's ``PyJWKClient`` (signature, ``exp``/``nbf``, ``iss``, ``aud``); groups in ``roles_claim``
  map to roles through ``api.oidc.group_roles`` and the team-lead / member group prefixes.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jwt
import yaml

from api.config import ApiSettings, OidcSettings
from api.errors import ApiError, Unauthorized
from changes.model import Actor
from gpufinops.errors import ConfigError, InputError
from gpufinops.views.names import ROLE_PATTERN as NAMES_ROLE_PATTERN

__all__ = [
    "ROLE_PATTERN",
    "TOKEN_PREFIX",
    "TokenEntry",
    "TokenStore",
    "OidcVerifier",
    "Authenticator",
    "validate_roles",
    "roles_from_groups",
]

TOKEN_PREFIX = "gfo_"
ROLE_PATTERN = NAMES_ROLE_PATTERN  # the one role vocabulary (gpufinops.views.names)
_VERIFIED_MAX = 10_000
_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9@._-]{0,127}$")


def validate_roles(roles: Iterable[str]) -> frozenset[str]:
    out = frozenset(r.strip() for r in roles)
    if not out:
        raise InputError("a token needs at least one role (platform-admin, finance, team-lead:<team>, member:<team>)")
    bad = sorted(r for r in out if not ROLE_PATTERN.match(r))
    if bad:
        raise InputError(
            f"unknown role(s) {', '.join(bad)}: use platform-admin, finance, team-lead:<team> or member:<team>"
        )
    return out


def _hash(salt: str, token: str) -> str:
    return hashlib.sha256(bytes.fromhex(salt) + token.encode()).hexdigest()


@dataclass(frozen=True)
class TokenEntry:
    name: str
    roles: frozenset[str]
    salt: str
    sha256: str
    created_at: str | None = None

    def matches(self, token: str) -> bool:
        return hmac.compare_digest(_hash(self.salt, token), self.sha256)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "roles": sorted(self.roles), "salt": self.salt, "sha256": self.sha256,
                "created_at": self.created_at}


class TokenStore:
    """The embedded tokens file: create tokens, verify a presented one."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._entries: list[TokenEntry] = []
        # sha256(token) -> the entry it verified to, for the file version ``_stamp`` (bounded)
        self._verified: dict[bytes, TokenEntry] = {}

    # ------------------------------------------------------------------ reading
    def _file_stamp(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def _read(self) -> list[TokenEntry]:
        try:
            data = yaml.safe_load(self.path.read_text()) or {}
        except FileNotFoundError:
            return []
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"API tokens file {self.path} cannot be read: {exc}") from exc
        items = data.get("tokens", []) if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise ConfigError(f"API tokens file {self.path}: `tokens` must be a list")
        out = []
        for i, item in enumerate(items):
            try:
                out.append(TokenEntry(name=str(item["name"]), roles=validate_roles(item["roles"]),
                                      salt=str(item["salt"]), sha256=str(item["sha256"]),
                                      created_at=item.get("created_at")))
            except (KeyError, TypeError, InputError) as exc:
                raise ConfigError(f"API tokens file {self.path}: entry {i + 1} is invalid: {exc}") from exc
        return out

    def _refresh(self) -> None:
        """Re-read the file when its stamp moved (caller holds the lock)."""
        stamp = self._file_stamp()
        if stamp != self._stamp:
            self._entries = self._read()
            self._verified = {}
            self._stamp = stamp

    def entries(self) -> list[TokenEntry]:
        with self._lock:
            self._refresh()
            return list(self._entries)

    def verify(self, token: str) -> TokenEntry | None:
        digest = hashlib.sha256(token.encode()).digest()
        with self._lock:
            self._refresh()
            hit = self._verified.get(digest)
            if hit is not None:
                return hit
            entries, stamp = list(self._entries), self._stamp
        found = None
        for entry in entries:
            # no early exit: the time taken does not depend on which entry matched
            if entry.matches(token):
                found = entry
        if found is not None:
            with self._lock:
                # only if the file did not change meanwhile; bounded: a full cache starts over
                if self._stamp == stamp:
                    if len(self._verified) >= _VERIFIED_MAX:
                        self._verified = {}
                    self._verified[digest] = found
        return found

    # ------------------------------------------------------------------ writing
    def _write(self, entries: Sequence[TokenEntry]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        text = "# gpufinops API tokens: salted SHA-256 hashes only (`gpufinops api token create`)\n"
        text += yaml.safe_dump({"tokens": [e.to_dict() for e in entries]}, sort_keys=False)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, self.path)

    def create(self, name: str, roles: Iterable[str], *, replace: bool = False) -> str:
        """Add a token named ``name``; return the token (shown once, never stored)."""
        if not _NAME_PATTERN.match(name):
            raise InputError(f"token name {name!r} must be 1-128 letters, digits, '@', '.', '_' or '-'")
        role_set = validate_roles(roles)
        with self._lock:
            entries = self._read()
            if any(e.name == name for e in entries) and not replace:
                raise InputError(f"a token named {name!r} exists in {self.path}; pass --replace to rotate it")
            entries = [e for e in entries if e.name != name]
            token = TOKEN_PREFIX + secrets.token_urlsafe(32)
            salt = secrets.token_hex(16)
            entries.append(TokenEntry(name=name, roles=role_set, salt=salt, sha256=_hash(salt, token),
                                      created_at=datetime.now(UTC).isoformat(timespec="seconds")))
            self._write(entries)
            self._stamp = None
        return token

    def revoke(self, name: str) -> bool:
        with self._lock:
            entries = self._read()
            kept = [e for e in entries if e.name != name]
            if len(kept) == len(entries):
                return False
            self._write(kept)
            self._stamp = None
        return True


def roles_from_groups(groups: Iterable[str], oidc: OidcSettings) -> frozenset[str]:
    roles: set[str] = set()
    for group in groups:
        if group in oidc.group_roles:
            roles.add(oidc.group_roles[group])
        elif oidc.team_lead_group_prefix and group.startswith(oidc.team_lead_group_prefix):
            roles.add("team-lead:" + group[len(oidc.team_lead_group_prefix):])
        elif oidc.member_group_prefix and group.startswith(oidc.member_group_prefix):
            roles.add("member:" + group[len(oidc.member_group_prefix):])
    return frozenset(r for r in roles if ROLE_PATTERN.match(r))


class OidcVerifier:
    """Verifies RS256 JWTs against the issuer's JWKS (keys cached, refetched on an unknown kid)."""

    def __init__(self, oidc: OidcSettings) -> None:
        if not oidc.configured:
            raise ConfigError("api.oidc needs issuer, audience and jwks_url")
        self.oidc = oidc
        self._client = jwt.PyJWKClient(str(oidc.jwks_url), cache_keys=True,
                                       lifespan=max(oidc.jwks_cache_s, 1), timeout=10)

    def claims(self, token: str) -> dict[str, Any]:
        o = self.oidc
        try:
            key = self._client.get_signing_key_from_jwt(token)
        except jwt.PyJWKClientConnectionError as exc:
            raise ApiError(503, f"the identity provider's JWKS at {o.jwks_url} cannot be fetched: {exc}") from exc
        except jwt.PyJWKClientError as exc:
            raise Unauthorized(f"token signing key not accepted: {exc}") from exc
        except jwt.InvalidTokenError as exc:
            raise Unauthorized(f"token is not a valid JWT: {exc}") from exc
        try:
            claims: dict[str, Any] = jwt.decode(
                token, key.key, algorithms=o.algorithms, audience=o.audience, issuer=o.issuer,
                leeway=o.leeway_s, options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError as exc:
            raise Unauthorized("token has expired") from exc
        except jwt.InvalidAudienceError as exc:
            raise Unauthorized(f"token audience is not {o.audience!r}") from exc
        except jwt.InvalidIssuerError as exc:
            raise Unauthorized(f"token issuer is not {o.issuer!r}") from exc
        except jwt.InvalidSignatureError as exc:
            raise Unauthorized("token signature does not verify") from exc
        except jwt.InvalidTokenError as exc:
            raise Unauthorized(f"token rejected: {exc}") from exc
        return claims

    def actor(self, token: str) -> Actor:
        claims = self.claims(token)
        o = self.oidc
        raw = claims.get(o.roles_claim, [])
        groups = re.split(r"[\s,]+", raw) if isinstance(raw, str) else [str(g) for g in raw or []]
        name = str(claims.get(o.username_claim) or claims.get("sub") or "")
        if not name:
            raise Unauthorized(f"token has neither {o.username_claim!r} nor 'sub'")
        return Actor(name=name, roles=roles_from_groups(groups, o))


def _looks_like_jwt(token: str) -> bool:
    return token.count(".") == 2 and not token.startswith(TOKEN_PREFIX)


class Authenticator:
    """``Authorization`` header -> ``Actor`` under the configured mode; raises ``Unauthorized``."""

    def __init__(self, api: ApiSettings, tokens_path: Path) -> None:
        self.mode = api.auth_mode
        self.store = TokenStore(tokens_path)
        self.oidc = OidcVerifier(api.oidc) if api.auth_mode in ("oidc", "both") else None

    def authenticate(self, authorization: str | None) -> Actor:
        if not authorization:
            raise Unauthorized("missing `Authorization: Bearer <token>` header")
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise Unauthorized("the Authorization header must be `Bearer <token>`")
        if self.oidc is not None and (self.mode == "oidc" or _looks_like_jwt(token)):
            actor = self.oidc.actor(token)
        elif self.mode == "oidc":
            raise Unauthorized("only OIDC tokens are accepted")
        else:
            entry = self.store.verify(token)
            if entry is None:
                raise Unauthorized("unknown or revoked token")
            actor = Actor(name=entry.name, roles=entry.roles)
        if not actor.roles:
            raise ApiError(403, f"{actor.name} has no gpufinops role (platform-admin, finance, team-lead:<team>, "
                                "member:<team>)")
        return actor
