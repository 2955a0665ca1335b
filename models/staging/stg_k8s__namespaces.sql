-- The k8s_namespaces landing table, read from the Parquet lake (typed empty when it has no files yet).
{{ staging_select('k8s_namespaces', lake_scan('k8s_namespaces')) }}
