-- The prices landing table, read from the Parquet lake (typed empty when it has no files yet).
{{ staging_select('prices', lake_scan('prices')) }}
