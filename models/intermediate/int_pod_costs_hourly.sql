-- Per pod per hour on a node: measured/utilised/idle GPU-hours and the pod's cost (DESIGN §3):
--   gpu   = gpu_equiv × covered hours × per-GPU rate            (= A × rate)
--   cpu   = max(cpu request, mean cpu usage) × w × core rate
--   mem   = max(memory request, mean working set) GiB × w × GiB rate
--   idle  = gpu cost × (1 − u) for measured hours, 0 for unmeasured ones.
-- measured_gpu_hours = A when the pod-hour has DCGM samples, else 0: unmeasured hours are counted
-- (unmeasured_gpu_hours), never read as 0 % or 100 % busy.

-- Joined to the utilisation and the container usage by the hour and the pod's 64-bit key (macro key_hash,
-- as int_pod_utilization_hourly), not by (cluster, namespace, pod).

with allocation as (
    select *, {{ pod_key() }} as pod_key
    from {{ ref('int_pod_allocation_hourly') }}
),

utilization as (
    select * from {{ ref('int_pod_utilization_hourly') }}
),

usage as (
    select *, {{ pod_key() }} as pod_key
    from {{ ref('int_container_usage_hourly') }}
),

node_costs as (
    select cluster, hour, node, gpu_rate_usd, core_rate_usd, gib_rate_usd, gpu_product, capacity_type
    from {{ ref('int_node_costs_hourly') }}
),

joined as (
    select
        a.*,
        case when a.gpu_hours > 0 then u.utilization end as utilization,
        a.gpu_hours > 0 and u.utilization is not null as is_measured,
        us.cpu_usage_cores,
        us.memory_usage_gib,
        coalesce(n.gpu_rate_usd, 0) as gpu_rate_usd,
        coalesce(n.core_rate_usd, 0) as core_rate_usd,
        coalesce(n.gib_rate_usd, 0) as gib_rate_usd,
        n.gpu_product as gpu_model,
        n.capacity_type
    from allocation as a
    left join utilization as u
        on a.hour = u.hour and a.pod_key = u.pod_key
    left join usage as us
        on a.hour = us.hour and a.pod_key = us.pod_key
    left join node_costs as n
        on a.cluster = n.cluster and a.hour = n.hour and a.node = n.node
),

final as (
    select
        cluster,
        hour,
        node,
        namespace,
        pod,
        pod_uid,
        gpu_model,
        gpu_resource,
        capacity_type,
        gpu_equiv,
        covered_hours,
        cpu_request,
        memory_request_gib,
        cpu_usage_cores,
        memory_usage_gib,
        utilization,
        gpu_hours,
        case when is_measured then gpu_hours else 0 end as measured_gpu_hours,
        case when is_measured then gpu_hours * utilization else 0 end as utilized_gpu_hours,
        case when is_measured then gpu_hours * (1 - utilization) else 0 end as idle_gpu_hours,
        case when is_measured then 0 else gpu_hours end as unmeasured_gpu_hours,
        gpu_hours * gpu_rate_usd as gpu_cost_usd,
        case when is_measured then gpu_hours * gpu_rate_usd * (1 - utilization) else 0 end as idle_cost_usd,
        greatest(cpu_request, coalesce(cpu_usage_cores, 0)) * covered_hours * core_rate_usd as cpu_cost_usd,
        greatest(memory_request_gib, coalesce(memory_usage_gib, 0)) * covered_hours * gib_rate_usd as memory_cost_usd
    from joined
)

select * from final
