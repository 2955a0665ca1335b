"""Ingest: every source lands Parquet in the lake through :mod:`ingest.lake`."""
