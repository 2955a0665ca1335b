"""Errors as RFC 7807 ``application/problem+json`` with a clear ``detail``.

The domain's errors map to statuses here, in one place:

| error | status |
|---|---|
| ``Unauthorized`` (no/bad token) | 401 + ``WWW-Authenticate: Bearer`` |
| ``Forbidden`` (visible object, missing role) | 403 |
| ``NotFound`` (absent, or another team's) | 404 |
| ``Conflict`` (stale version, wrong status, already applying) | 409 |
| ``PolicyRefused`` (a gate said no; ``gate`` names it) | 409, but 422 for ``gate="ticket"`` (the request lacks a valid ticket) |
| ``BadRequest`` / other ``InputError``, invalid JSON | 400 |
| request validation (wrong types, missing fields, bad query values) | 422 with ``errors`` |
| body above ``api.max_body_bytes`` | 413 |
| ``ConfigError`` (e.g. no warehouse built yet, no Kubernetes target), ``TransientError`` | 503 |
| any other ``TerminalError`` (e.g. the controller refusing a drain, target missing) | 409 |
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from gpufinops.errors import (
    BadRequest,
    ConfigError,
    Conflict,
    Forbidden,
    GpufinopsError,
    InputError,
    NotFound,
    PolicyRefused,
    TerminalError,
    TransientError,
)

__all__ = ["ApiError", "Unauthorized", "problem", "install_error_handlers", "PROBLEM_TYPE", "PROBLEM_RESPONSES"]

PROBLEM_TYPE = "application/problem+json"
_log = logging.getLogger("gpufinops.api")

_TITLES = {
    400: "Bad request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    413: "Request body too large",
    415: "Unsupported media type",
    422: "Unprocessable request",
    500: "Internal error",
    503: "Unavailable",
}

# shared `responses=` for the OpenAPI document: every route can answer these problems
_PROBLEM_SCHEMA = {
    "content": {PROBLEM_TYPE: {"schema": {"type": "object", "properties": {
        "type": {"type": "string"}, "title": {"type": "string"}, "status": {"type": "integer"},
        "detail": {"type": "string"}}}}}
}
PROBLEM_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"description": _TITLES[code], **_PROBLEM_SCHEMA} for code in (400, 401, 403, 404, 409, 413, 422)
}


class ApiError(Exception):
    """An error raised by the API layer itself with its HTTP status."""

    def __init__(self, status: int, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.extra = extra


class Unauthorized(ApiError):
    def __init__(self, detail: str) -> None:
        super().__init__(401, detail)


def problem(status: int, detail: str, *, title: str | None = None, headers: dict[str, str] | None = None,
            **extra: Any) -> JSONResponse:
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": title or _TITLES.get(status, "Error"),
        "status": status,
        "detail": detail,
        **extra,
    }
    return JSONResponse(body, status_code=status, media_type=PROBLEM_TYPE, headers=headers)


def status_of(exc: GpufinopsError) -> int:
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, Forbidden):
        return 403
    if isinstance(exc, PolicyRefused):
        return 422 if getattr(exc, "gate", None) == "ticket" else 409
    if isinstance(exc, Conflict):
        return 409
    if isinstance(exc, BadRequest | InputError):
        return 400
    if isinstance(exc, ConfigError | TransientError):
        return 503
    if isinstance(exc, TerminalError):
        return 409  # e.g. the controller refusing a plan the cluster's state does not allow
    return 500


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_request: Request, exc: ApiError) -> JSONResponse:
        headers = {"WWW-Authenticate": 'Bearer realm="gpufinops"'} if exc.status == 401 else None
        return problem(exc.status, exc.detail, headers=headers, **exc.extra)

    @app.exception_handler(GpufinopsError)
    async def _domain_error(_request: Request, exc: GpufinopsError) -> JSONResponse:
        status = status_of(exc)
        extra: dict[str, Any] = {}
        if isinstance(exc, PolicyRefused):
            extra["gate"] = getattr(exc, "gate", None)
            title = "Refused by policy"
        else:
            title = None
        if status >= 500:
            _log.error("request failed: %s", exc, exc_info=exc)
        return problem(status, str(exc), title=title, **extra)

    @app.exception_handler(RequestValidationError)
    async def _validation(_request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
            for e in exc.errors()
        ]
        if any(e["type"] == "json_invalid" for e in errors):
            return problem(400, "the request body is not valid JSON", errors=_json_safe(errors))
        first = errors[0] if errors else {"loc": [], "msg": "invalid request"}
        where = ".".join(str(p) for p in first["loc"])
        detail = f"{where}: {first['msg']}" if where else str(first["msg"])
        if len(errors) > 1:
            detail += f" (and {len(errors) - 1} more)"
        return problem(422, detail, errors=_json_safe(errors))

    @app.exception_handler(StarletteHTTPException)
    async def _http(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        return problem(exc.status_code, detail, headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _unexpected(_request: Request, exc: Exception) -> JSONResponse:
        _log.error("unexpected error", exc_info=exc)
        return problem(500, "internal error; the server log has the details")
