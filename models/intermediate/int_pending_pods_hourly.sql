-- Pods waiting for a node (no node bound) per cluster-hour: not costed, counted.
with pods as (
    select * from {{ ref('int_pods_hourly') }}
    where node is null
),

specs as (
    select * from {{ ref('int_pod_specs') }}
),

final as (
    select
        p.cluster,
        p.hour,
        count(distinct p.pod_uid) as pending_pods,
        count(distinct case
            when s.gpu_count_request + s.gpu_shared_request + s.mig_count_request + s.other_accelerator_request > 0
                 or s.gpu_milli > 0 then p.pod_uid end) as pending_gpu_pods
    from pods as p
    left join specs as s
        on p.cluster = s.cluster and p.pod_uid = s.pod_uid
    group by p.cluster, p.hour
)

select * from final
