-- The node-presence rollup (macros/rollups.sql, the node runs, written by the lake writer beside each raw
-- node-snapshot file): one row per run of a node's consecutive snapshots per clock hour and file.
{{ staging_select('k8s_node_runs', lake_scan('k8s_node_runs')) }}
