{{ incremental_by(['cluster', 'hour']) }}
-- One row per pod per hour on a node: its GPU-equivalent (DESIGN §3), the resource that
-- determined it, and allocated GPU-hours A = gpu_equiv × covered hours. Pods not bound to a node
-- are not here (int_pending_pods_hourly counts them).
-- MIG (models/README.md "MIG"): n instances of g compute slices = n × g / S GPUs, S the compute
-- slices of the GPU's whole layout, so the instances of a layout sum to exactly one GPU. S, the
-- largest of what is known: the DCGM GPU-instance series of the pod's own GPUs (else the node's
-- largest), and the layout the node's nvidia.com/mig.config label names (all-<profile>,
-- all-balanced; seeds/mig_profiles.csv); 7 when neither is known (never more than one GPU).
-- A table, incremental per cluster-hour, not a view: four models read it (the cost chain under
-- fct_gpu_allocation_hourly twice, the capacity input, fct_pods_latest), and each read of a view
-- evaluated the whole join again.
-- The MIG layout lookup of a pod's GPUs joins by the hour and the pod's 64-bit key (macro pod_key, as
-- int_pod_utilization_hourly): DuckDB estimated that lookup (empty without MIG) at ~45 M rows and hashed
-- every pod-hour's text identity into its join (1,000 nodes: 6.3-6.9 -> 4.2-4.4 CPU-s alone).

with pods_hourly as (
    select * from {{ ref('int_pods_hourly') }} as src
    where node is not null
    {%- if is_incremental() %}
    and {{ incremental_since('src.hour') }}
    {%- endif %}
),

specs as (
    select * from {{ ref('int_pod_specs') }}
),

nodes_hourly as (
    select * from {{ ref('int_nodes_hourly') }} as src
    {%- if is_incremental() %}
    where {{ incremental_since('src.hour') }}
    {%- endif %}
),

mig_profiles as (
    select * from {{ ref('mig_profiles') }}
),

gpu_layouts as (
    select * from {{ ref('int_mig_layouts_hourly') }} as src
    {%- if is_incremental() %}
    where {{ incremental_since('src.hour') }}
    {%- endif %}
),

node_dcgm_layouts as (
    select cluster, hour, node, max(layout_slices) as dcgm_layout_slices
    from gpu_layouts
    group by cluster, hour, node
),

pod_dcgm_layouts as (
    -- the layouts of the GPUs a pod's MIG instances are on (mean when it has several)
    select u.hour, {{ pod_key('u') }} as pod_key,
           avg(l.layout_slices) as dcgm_layout_slices
    from {{ ref('int_gpu_usage_hourly') }} as u
    inner join gpu_layouts as l
        on u.cluster = l.cluster and u.hour = l.hour and u.hostname = l.node and u.device_id = l.device_id
    where u.is_mig and u.pod is not null
    {%- if is_incremental() %}
    and {{ incremental_since('u.hour', cluster='u.cluster') }}
    {%- endif %}
    group by u.hour, {{ pod_key('u') }}
),

family_balanced as (
    select gpu_family, sum(balanced_instances * compute_slices) as balanced_slices
    from mig_profiles
    group by gpu_family
),

joined as (
    select
        p.cluster,
        p.hour,
        p.node,
        p.namespace,
        p.pod,
        p.pod_uid,
        p.phase,
        p.covered_hours,
        p.in_first_snapshot,
        s.cpu_request,
        s.memory_request_bytes,
        s.gpu_count_request,
        s.gpu_shared_request,
        s.gpu_milli,
        s.mig_resource,
        s.mig_profile,
        s.mig_count_request,
        s.other_accelerator_resource,
        s.other_accelerator_request,
        n.gpu_product,
        n.gpu_memory_mib,
        n.gpu_replicas,
        n.mig_config,
        {{ gpu_family('n.gpu_product', 'n.gpu_memory_mib') }} as gpu_family
    from pods_hourly as p
    left join specs as s
        on p.cluster = s.cluster and p.pod_uid = s.pod_uid
    left join nodes_hourly as n
        on p.cluster = n.cluster and p.node = n.node and p.hour = n.hour
),

with_mig as (
    select
        j.*,
        -- slices from the profile table of the node's GPU family; an unknown profile falls back to
        -- its compute slices and memory / (device memory / 8)
        case when j.mig_profile is null then null else coalesce(
            m.compute_slices, {{ safe_cast("regexp_extract(j.mig_profile, '^([0-9]+)g[.]', 1)", 'integer') }}) end as mig_compute_slices,
        case when j.mig_profile is null then null else coalesce(
            m.memory_slices,
            round({{ safe_cast("regexp_extract(j.mig_profile, '[.]([0-9]+)gb$', 1)", 'double') }}
                  / nullif(j.gpu_memory_mib / 1024.0 / 8.0, 0)),
            {{ safe_cast("regexp_extract(j.mig_profile, '^([0-9]+)g[.]', 1)", 'integer') }}) end as mig_memory_slices,
        case when j.mig_profile is not null then
            {{ mig_layout_slices('j.mig_config', 'lm.compute_slices', 'lm.max_instances', 'fb.balanced_slices') }}
        end as label_layout_slices,
        coalesce(pd.dcgm_layout_slices, nd.dcgm_layout_slices) as dcgm_layout_slices
    from joined as j
    left join mig_profiles as m
        on j.gpu_family = m.gpu_family and j.mig_profile = m.profile
    -- the profile an `all-<profile>` label names
    left join mig_profiles as lm
        on j.gpu_family = lm.gpu_family and j.mig_config = 'all-' || lm.profile
    left join family_balanced as fb
        on j.gpu_family = fb.gpu_family
    left join pod_dcgm_layouts as pd
        on j.mig_profile is not null and j.hour = pd.hour
        and {{ pod_key('j') }} = pd.pod_key
    left join node_dcgm_layouts as nd
        on j.mig_profile is not null and j.cluster = nd.cluster and j.hour = nd.hour and j.node = nd.node
),

layouts as (
    select
        *,
        nullif(greatest(coalesce(dcgm_layout_slices, 0), coalesce(label_layout_slices, 0)), 0) as mig_layout_slices,
        case
            when mig_profile is null then null
            when coalesce(dcgm_layout_slices, 0) = 0 and coalesce(label_layout_slices, 0) = 0 then 'unknown'
            when coalesce(dcgm_layout_slices, 0) >= coalesce(label_layout_slices, 0) then 'dcgm'
            else 'label'
        end as mig_layout_source
    from with_mig
),

equiv as (
    select
        *,
        {{ mig_gpu_equiv('mig_count_request', 'mig_compute_slices', 'mig_layout_slices') }} as mig_equiv
    from layouts
),

final as (
    select
        cluster,
        hour,
        node,
        namespace,
        pod,
        pod_uid,
        phase,
        covered_hours,
        in_first_snapshot,
        coalesce(cpu_request, 0) as cpu_request,
        coalesce(memory_request_bytes, 0) / 1073741824.0 as memory_request_gib,
        {{ gpu_equiv('gpu_milli', 'mig_equiv', 'gpu_count_request', 'gpu_shared_request',
                     'other_accelerator_request', 'gpu_replicas') }} as gpu_equiv,
        {{ gpu_resource('gpu_milli', 'mig_resource', 'mig_equiv', 'gpu_count_request', 'gpu_shared_request',
                        'other_accelerator_resource', 'other_accelerator_request') }} as gpu_resource,
        mig_layout_slices,
        mig_layout_source,
        {{ gpu_equiv('gpu_milli', 'mig_equiv', 'gpu_count_request', 'gpu_shared_request',
                     'other_accelerator_request', 'gpu_replicas') }} * covered_hours as gpu_hours
    from equiv
)

select * from final
