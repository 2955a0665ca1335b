-- The k8s_nodes landing table, read from the Parquet lake (typed empty when it has no files yet).
{{ staging_select('k8s_nodes', lake_scan('k8s_nodes')) }}
