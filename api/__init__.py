"""The REST API (FastAPI): PRODUCT.md's workload endpoints plus showback, recommendations, changes, audit.

``api.app.create_app(settings)`` builds the app; ``gpufinops serve api`` runs it under uvicorn.
"""

__all__: list[str] = []
