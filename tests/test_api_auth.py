"""Auth: the embedded tokens file (hashes only, the CLI that creates tokens) and OIDC JWTs verified
against a JWKS served from a local HTTP server with a key pair the test generates."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
import pytest
import typer
from cryptography.hazmat.primitives.asymmetric import rsa
from typer.testing import CliRunner

from api.auth import Authenticator, TokenStore
from api.config import ApiSettings, OidcSettings
from api.errors import ApiError, Unauthorized
from gpufinops.errors import InputError

ISSUER, AUDIENCE = "https://idp.example.test/", "gpufinops-api"


def test_token_store_keeps_hashes_only_and_verifies_in_constant_form(tmp_path: Path) -> None:
    path = tmp_path / "tokens.yaml"
    store = TokenStore(path)
    token = store.create("alice", ["team-lead:alpha", "member:beta"])
    text = path.read_text()
    assert token not in text and "sha256" in text
    assert path.stat().st_mode & 0o077 == 0  # 0600
    entry = store.verify(token)
    assert entry is not None and entry.name == "alice" and entry.roles == {"team-lead:alpha", "member:beta"}
    assert store.verify(token + "x") is None
    with pytest.raises(InputError, match="exists"):
        store.create("alice", ["finance"])
    with pytest.raises(InputError, match="unknown role"):
        store.create("bob", ["root"])
    rotated = store.create("alice", ["finance"], replace=True)
    assert store.verify(token) is None and store.verify(rotated) is not None
    assert store.revoke("alice") and store.verify(rotated) is None


def test_cli_token_create_prints_the_token_once(tmp_path: Path) -> None:
    from cli.commands import api_tokens
    from gpufinops.settings import load_settings

    app = typer.Typer()

    @app.callback()
    def _root(ctx: typer.Context) -> None:
        ctx.obj = load_settings(home=tmp_path)

    api_tokens.register(app)
    r = CliRunner().invoke(app, ["api", "token", "create", "--name", "ci", "--role", "finance"])
    assert r.exit_code == 0, r.output
    token = r.output.strip().splitlines()[-1]
    assert token.startswith("gfo_")
    assert token not in (tmp_path / "api-tokens.yaml").read_text()
    auth = Authenticator(ApiSettings(), tmp_path / "api-tokens.yaml")
    actor = auth.authenticate(f"Bearer {token}")
    assert actor.name == "ci" and actor.is_finance
    bad = CliRunner().invoke(app, ["api", "token", "create", "--name", "x", "--role", "king"])
    assert bad.exit_code == 2 and "unknown role" in bad.output


def test_authenticator_refuses_missing_and_malformed_headers(tmp_path: Path) -> None:
    auth = Authenticator(ApiSettings(), tmp_path / "none.yaml")
    for header in (None, "", "Basic abc", "Bearer", "Bearer nope"):
        with pytest.raises(Unauthorized):
            auth.authenticate(header)


# ---------------------------------------------------------------- OIDC


class Jwks:
    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        body = json.dumps({"keys": [{**public, "kid": "k1", "use": "sig", "alg": "RS256"}]}).encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/jwks.json"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def token(self, *, key: Any = None, kid: str = "k1", **claims: Any) -> str:
        now = int(time.time())
        payload = {"iss": ISSUER, "aud": AUDIENCE, "sub": "u-1", "preferred_username": "carol",
                   "iat": now, "exp": now + 300, "groups": ["gpufinops-lead-alpha", "gpufinops-finance", "other"]}
        payload.update(claims)
        return jwt.encode(payload, key or self.key, algorithm="RS256", headers={"kid": kid})


@pytest.fixture(scope="module")
def jwks() -> Iterator[Jwks]:
    server = Jwks()
    yield server
    server.httpd.shutdown()


def _auth(jwks: Jwks, tmp_path: Path, mode: str = "oidc") -> Authenticator:
    api = ApiSettings(auth_mode=mode, oidc=OidcSettings(issuer=ISSUER, audience=AUDIENCE, jwks_url=jwks.url))
    return Authenticator(api, tmp_path / "tokens.yaml")


def test_oidc_good_token_maps_groups_to_roles(jwks: Jwks, tmp_path: Path) -> None:
    actor = _auth(jwks, tmp_path).authenticate("Bearer " + jwks.token())
    assert actor.name == "carol"
    assert actor.roles == {"team-lead:alpha", "finance"}


@pytest.mark.parametrize(("claims", "kwargs", "message"), [
    ({"exp": int(time.time()) - 3600}, {}, "expired"),
    ({"aud": "someone-else"}, {}, "audience"),
    ({"iss": "https://evil.example.test/"}, {}, "issuer"),
    ({}, {"bad_key": True}, "signature"),
    ({}, {"kid": "k-unknown"}, "signing key"),
])
def test_oidc_rejects_bad_tokens(jwks: Jwks, tmp_path: Path, claims: dict[str, Any], kwargs: dict[str, Any],
                                 message: str) -> None:
    token = jwks.token(key=jwks.other if kwargs.get("bad_key") else None, kid=kwargs.get("kid", "k1"), **claims)
    with pytest.raises(Unauthorized, match=message):
        _auth(jwks, tmp_path).authenticate("Bearer " + token)


def test_oidc_token_without_a_role_is_403_and_both_mode_accepts_file_tokens(jwks: Jwks, tmp_path: Path) -> None:
    auth = _auth(jwks, tmp_path, mode="both")
    with pytest.raises(ApiError) as info:
        auth.authenticate("Bearer " + jwks.token(groups=["unrelated"]))
    assert info.value.status == 403
    token = TokenStore(tmp_path / "tokens.yaml").create("svc", ["member:beta"])
    assert auth.authenticate("Bearer " + token).member_teams == {"beta"}
    only_oidc = _auth(jwks, tmp_path, mode="oidc")
    with pytest.raises(Unauthorized):
        only_oidc.authenticate("Bearer " + token)
