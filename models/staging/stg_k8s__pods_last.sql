-- The pod-snapshot rollup (macros/rollups.sql, written by the lake writer beside each raw file): each
-- pod's last-snapshot rows per raw file, staged like the snapshots themselves.
{{ staging_select('k8s_pods_last', lake_scan('k8s_pods_last')) }}
