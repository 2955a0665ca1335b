-- The hourly rollups of the DCGM samples (macros/rollups.sql, written by the lake writer beside each
-- raw file): one row per device or MIG instance, pod and hour per raw file; merged by the models.
{{ staging_select('gpu_samples_hourly', lake_scan('gpu_samples_hourly')) }}
