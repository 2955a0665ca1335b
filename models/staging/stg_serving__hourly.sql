-- The hourly rollups of the serving counters (macros/rollups.sql, written by the lake writer beside
-- each raw file): per series, hour and raw file, the first / last counter values and the increases
-- between the part's samples; int_serving_counters_hourly joins the parts up.
{{ staging_select('serving_requests_hourly', lake_scan('serving_requests_hourly')) }}
