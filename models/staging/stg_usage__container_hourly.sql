-- The hourly rollups of the container usage samples (macros/rollups.sql, written by the lake writer
-- beside each raw file): one row per container and hour per raw file; merged by the models.
{{ staging_select('container_usage_hourly', lake_scan('container_usage_hourly')) }}
