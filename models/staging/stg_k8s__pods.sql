-- The k8s_pods landing table, read from the Parquet lake (typed empty when it has no files yet).
{{ staging_select('k8s_pods', lake_scan('k8s_pods')) }}
