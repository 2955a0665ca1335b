-- The gpu_samples landing table, read from the Parquet lake (typed empty when it has no files yet).
{{ staging_select('gpu_samples', lake_scan('gpu_samples')) }}
