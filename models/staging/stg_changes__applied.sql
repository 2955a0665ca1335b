-- The applied_changes landing table (the app DB's applied changes, ingest/applied_changes.py).
{{ staging_select('applied_changes', lake_scan('applied_changes')) }}
