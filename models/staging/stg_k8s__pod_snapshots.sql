-- The pod-snapshot times per raw pod-snapshot file and cluster (macros/rollups.sql, the snapshot times):
-- the snapshot timeline without a scan of every snapshot row.
{{ staging_select('k8s_pod_snapshots', lake_scan('k8s_pod_snapshots')) }}
