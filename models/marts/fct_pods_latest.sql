{{ incremental_by(['cluster']) }}
{{ config(on_schema_change='append_new_columns') }}
-- depends_on: {{ ref('stg_k8s__pods_last') }}
-- The latest placements: every pod bound to a node (Running or Pending) in each cluster's latest pod
-- snapshot, with its effective requests (int_pod_specs: the one definition), per-container
-- requests, GPU-equivalent (int_pod_allocation_hourly at the pod's newest hour), tier and workload
-- (int_pod_attributes) and the scheduling constraints the packer honours (nodeSelector,
-- tolerations, do-not-disrupt / PDB annotations). Incremental per cluster, like fct_nodes_latest.
-- It reads the k8s_pods_last rollup: every row of a cluster's latest snapshot is at its pod's last
-- snapshot in its file, so the rollup holds that snapshot whole, and a full build does not scan
-- every snapshot's nested columns.

with pods as {{ not_materialized() }} (
    select * from {{ landing_input('stg_k8s__pods_last', 'k8s_pods_last', 'snapshot_ts') }} as src
    {%- if is_incremental() %}
    where {{ incremental_since('src.snapshot_ts', 'snapshot_ts') }}
    {%- endif %}
),

latest as (
    select cluster, max(snapshot_ts) as snapshot_ts from pods group by cluster
),

placed_ranked as (
    select p.*, row_number() over (partition by p.cluster, p.namespace, p.pod order by p.pod_uid nulls last) as row_in_pod
    from pods as p
    inner join latest as l
        on p.cluster = l.cluster and p.snapshot_ts = l.snapshot_ts
    where p.node is not null and coalesce(p.phase, 'Running') in ('Running', 'Pending')
),

placed as (
    select * from placed_ranked where row_in_pod = 1
),

allocation as (
    select cluster, pod_uid, {{ arg_max('gpu_equiv', 'hour') }} as gpu_equiv, {{ arg_max('gpu_resource', 'hour') }} as gpu_resource
    from {{ ref('int_pod_allocation_hourly') }}
    -- int_pods_hourly: the view's left-most table, the same newest hour
    where hour >= {{ newest_minus_hours(ref('int_pod_allocation_hourly'), 3, probe=ref('int_pods_hourly')) }}
    group by cluster, pod_uid
),

final as (
    select
        p.cluster,
        p.snapshot_ts,
        p.namespace,
        p.pod,
        p.pod_uid,
        p.node,
        p.phase,
        p.owner_kind,
        p.owner_name,
        coalesce(a.workload, p.owner_name, p.pod) as workload,
        coalesce(a.workload_kind, 'Pod') as workload_kind,
        coalesce(a.tier, 'batch') as tier,
        coalesce(s.requests, {{ empty_map('string', 'double') }}) as requests,
        s.container_resources,
        coalesce(al.gpu_equiv, 0.0) as gpu_equiv,
        al.gpu_resource,
        s.gpu_milli,
        -- a fractional (gpu-milli) pod holds this share of one shared device; 0 = whole devices / none
        case when s.gpu_milli > 0 and s.gpu_milli < 1000 then s.gpu_milli / 1000.0 else 0.0 end as gpu_fraction,
        coalesce(s.checkpointed, false) as checkpointed,
        coalesce(lower(p.annotations['karpenter.sh/do-not-disrupt']) = 'true', false) as do_not_disrupt,
        nullif(p.annotations['{{ var("pdb_annotation") }}'], '') as pdb,
        -- the serving warm-up lead time (model load) the scale-to-zero window leaves before traffic returns
        {{ safe_cast("p.annotations['" ~ var('warmup_annotation') ~ "']", 'double') }} as warmup_seconds,
        p.node_selector,
        p.tolerations
    from placed as p
    left join {{ ref('int_pod_specs') }} as s
        on p.cluster = s.cluster and p.pod_uid = s.pod_uid
    left join {{ ref('int_pod_attributes') }} as a
        on p.cluster = a.cluster and p.pod_uid = a.pod_uid
    left join allocation as al
        on p.cluster = al.cluster and p.pod_uid = al.pod_uid
)

select * from final
