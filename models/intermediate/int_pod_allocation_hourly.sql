-- One row per pod per hour on a node: its GPU-equivalent (DESIGN §3), the resource that
-- determined it, and allocated GPU-hours A = gpu_equiv × covered hours. Pods not bound to a node
-- are not here (int_pending_pods_hourly counts them).

with pods_hourly as (
    select * from {{ ref('int_pods_hourly') }}
    where node is not null
),

specs as (
    select * from {{ ref('int_pod_specs') }}
),

nodes_hourly as (
    select * from {{ ref('int_nodes_hourly') }}
),

mig_profiles as (
    select * from {{ ref('mig_profiles') }}
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
            m.compute_slices, try_cast(regexp_extract(j.mig_profile, '^(\d+)g\.', 1) as integer)) end as mig_compute_slices,
        case when j.mig_profile is null then null else coalesce(
            m.memory_slices,
            round(try_cast(regexp_extract(j.mig_profile, '\.(\d+)gb$', 1) as double)
                  / nullif(j.gpu_memory_mib / 1024.0 / 8.0, 0)),
            try_cast(regexp_extract(j.mig_profile, '^(\d+)g\.', 1) as integer)) end as mig_memory_slices
    from joined as j
    left join mig_profiles as m
        on j.gpu_family = m.gpu_family and j.mig_profile = m.profile
),

equiv as (
    select
        *,
        {{ mig_gpu_equiv('mig_count_request', 'mig_compute_slices', 'mig_memory_slices') }} as mig_equiv
    from with_mig
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
        {{ gpu_equiv('gpu_milli', 'mig_equiv', 'gpu_count_request', 'gpu_shared_request',
                     'other_accelerator_request', 'gpu_replicas') }} * covered_hours as gpu_hours
    from equiv
)

select * from final
