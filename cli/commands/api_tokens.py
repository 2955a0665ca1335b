"""``gpufinops api token create|list|revoke``: the embedded API tokens file (hashes only).

``create`` prints the token once; only ``sha256(salt || token)`` is stored, in ``api.tokens_file``
(default ``<home>/api-tokens.yaml``, mode 0600).
"""

from __future__ import annotations

from typing import Annotated

import typer

from cli.context import console, handle_errors, settings_of

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    api_app = typer.Typer(help="The REST API's tokens.", no_args_is_help=True)
    token_app = typer.Typer(help="Bearer tokens of the embedded auth.", no_args_is_help=True)

    def _store(ctx: typer.Context):  # type: ignore[no-untyped-def]
        from api.auth import TokenStore
        from api.config import load_api_settings

        settings = settings_of(ctx)
        return TokenStore(load_api_settings(settings).tokens_path(settings))

    @token_app.command("create")
    @handle_errors
    def create(
        ctx: typer.Context,
        name: Annotated[str, typer.Option("--name", help="Who the token is for (the actor name in the audit log).")],
        role: Annotated[list[str], typer.Option("--role", help="platform-admin | finance | team-lead:<team> | "
                                                               "member:<team> (repeatable).")],
        replace: Annotated[bool, typer.Option("--replace", help="Rotate: replace a token of that name.")] = False,
    ) -> None:
        """Create a token and print it once (only its hash is stored)."""
        store = _store(ctx)
        token = store.create(name, role, replace=replace)
        console.print(f"token for {name} ({', '.join(sorted(role))}), stored as a hash in {store.path}:",
                      highlight=False)
        print(token)

    @token_app.command("list")
    @handle_errors
    def list_(ctx: typer.Context) -> None:
        """Names and roles of the stored tokens (never the tokens)."""
        for e in _store(ctx).entries():
            console.print(f"{e.name}\t{', '.join(sorted(e.roles))}\t{e.created_at or ''}", highlight=False)

    @token_app.command("revoke")
    @handle_errors
    def revoke(ctx: typer.Context, name: Annotated[str, typer.Option("--name")]) -> None:
        """Delete the token of that name."""
        if not _store(ctx).revoke(name):
            console.print(f"no token named {name}")
            raise typer.Exit(1)
        console.print(f"revoked {name}")

    api_app.add_typer(token_app, name="token")
    app.add_typer(api_app, name="api")
