-- The pod-presence rollup (macros/rollups.sql, the pod runs, written by the lake writer beside each
-- raw pod-snapshot file): one row per run of a pod's consecutive snapshots per clock hour and file.
{{ staging_select('k8s_pod_runs', lake_scan('k8s_pod_runs')) }}
