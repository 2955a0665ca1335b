-- The billing_focus landing table, read from the Parquet lake (typed empty when it has no files yet).
{{ staging_select('billing_focus', lake_scan('billing_focus')) }}
