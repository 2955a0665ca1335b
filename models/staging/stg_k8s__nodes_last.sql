-- The node-snapshot rollup (macros/rollups.sql, written by the lake writer beside each raw file): each
-- node's last-snapshot rows per clock hour and raw file, staged like the snapshots themselves.
{{ staging_select('k8s_nodes_last', lake_scan('k8s_nodes_last')) }}
