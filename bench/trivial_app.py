"""The API bench's baseline: a trivial FastAPI app with one route returning a constant JSON body.

``bench.api_load`` serves it with the same uvicorn settings, in its own process, and drives it with the
same client as the product's endpoints, in the same run, so the ratio of their req/s says how much of
the server's per-request budget the product's route spends beyond FastAPI and uvicorn themselves. Not
shipped: bench code only.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

__all__ = ["PATH", "create_trivial_app"]

PATH = "/trivial"
BODY: dict[str, Any] = {"status": "ok", "service": "gpufinops-bench-baseline", "value": 1}


def create_trivial_app() -> FastAPI:
    app = FastAPI(title="bench baseline")

    @app.get(PATH)
    async def trivial() -> dict[str, Any]:
        return BODY

    return app
