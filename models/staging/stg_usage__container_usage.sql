-- The container_usage landing table, read from the Parquet lake (typed empty when it has no files yet).
{{ staging_select('container_usage', lake_scan('container_usage')) }}
