-- The serving_requests landing table (request / token counters), read from the Parquet lake.
{{ staging_select('serving_requests', lake_scan('serving_requests')) }}
