{{ incremental_by(['cluster', 'hour']) }}
-- Per node per hour: capacity, cost split by resource, allocated and unallocated GPU-hours, and
-- unallocated cost per resource = node resource cost − Σ pod resource cost, clamped at 0; the
-- negative excess is overcommit (kept per resource and summed). Any part of the price no resource
-- rate carries (a node reporting no capacity) is unallocated too, so that for every node-hour
--   Σ pod total cost + unallocated_cost_usd − overcommit_cost_usd = node_cost_usd.

with nodes as (
    select * from {{ ref('int_node_costs_hourly') }} as src
    {%- if is_incremental() %}
    where {{ incremental_since('src.hour') }}
    {%- endif %}
),

pods as (
    select
        cluster,
        hour,
        node,
        sum(gpu_hours) as allocated_gpu_hours,
        sum(utilized_gpu_hours) as utilized_gpu_hours,
        sum(measured_gpu_hours) as measured_gpu_hours,
        sum(gpu_cost_usd) as pod_gpu_cost_usd,
        sum(cpu_cost_usd) as pod_cpu_cost_usd,
        sum(memory_cost_usd) as pod_memory_cost_usd,
        sum(total_cost_usd) as pod_total_cost_usd,
        count(*) as pods
    from {{ ref('fct_gpu_allocation_hourly') }} as src
    {%- if is_incremental() %}
    where {{ incremental_since('src.hour') }}
    {%- endif %}
    group by cluster, hour, node
),

joined as (
    select
        n.*,
        coalesce(p.allocated_gpu_hours, 0) as allocated_gpu_hours,
        coalesce(p.utilized_gpu_hours, 0) as utilized_gpu_hours,
        coalesce(p.measured_gpu_hours, 0) as measured_gpu_hours,
        coalesce(p.pod_gpu_cost_usd, 0) as pod_gpu_cost_usd,
        coalesce(p.pod_cpu_cost_usd, 0) as pod_cpu_cost_usd,
        coalesce(p.pod_memory_cost_usd, 0) as pod_memory_cost_usd,
        coalesce(p.pod_total_cost_usd, 0) as pod_total_cost_usd,
        coalesce(p.pods, 0) as pods,
        n.node_cost_usd - (n.node_gpu_cost_usd + n.node_cpu_cost_usd + n.node_memory_cost_usd) as unrated_cost_usd
    from nodes as n
    left join pods as p
        on n.cluster = p.cluster and n.hour = p.hour and n.node = p.node
),

final as (
    select
        hour,
        cluster,
        node,
        node_pool,
        instance_type,
        capacity_type,
        provider,
        region,
        gpu_product as gpu_model,
        gpu_capacity,
        cpu_capacity,
        memory_capacity_gib,
        covered_hours,
        usd_per_hour,
        price_source,
        gpu_rate_usd,
        core_rate_usd,
        gib_rate_usd,
        node_cost_usd,
        node_gpu_cost_usd as gpu_cost_usd,
        node_cpu_cost_usd as cpu_cost_usd,
        node_memory_cost_usd as memory_cost_usd,
        allocated_gpu_hours,
        greatest(coalesce(gpu_capacity, 0) * covered_hours - allocated_gpu_hours, 0) as unallocated_gpu_hours,
        greatest(allocated_gpu_hours - coalesce(gpu_capacity, 0) * covered_hours, 0) as overallocated_gpu_hours,
        greatest(node_gpu_cost_usd - pod_gpu_cost_usd, 0) as unallocated_gpu_cost_usd,
        greatest(node_cpu_cost_usd - pod_cpu_cost_usd, 0) as unallocated_cpu_cost_usd,
        greatest(node_memory_cost_usd - pod_memory_cost_usd, 0) as unallocated_memory_cost_usd,
        greatest(node_gpu_cost_usd - pod_gpu_cost_usd, 0)
            + greatest(node_cpu_cost_usd - pod_cpu_cost_usd, 0)
            + greatest(node_memory_cost_usd - pod_memory_cost_usd, 0)
            + greatest(unrated_cost_usd, 0) as unallocated_cost_usd,
        greatest(pod_gpu_cost_usd - node_gpu_cost_usd, 0) as overcommit_gpu_cost_usd,
        greatest(pod_cpu_cost_usd - node_cpu_cost_usd, 0) as overcommit_cpu_cost_usd,
        greatest(pod_memory_cost_usd - node_memory_cost_usd, 0) as overcommit_memory_cost_usd,
        greatest(pod_gpu_cost_usd - node_gpu_cost_usd, 0)
            + greatest(pod_cpu_cost_usd - node_cpu_cost_usd, 0)
            + greatest(pod_memory_cost_usd - node_memory_cost_usd, 0)
            + greatest(-unrated_cost_usd, 0) as overcommit_cost_usd,
        utilized_gpu_hours,
        measured_gpu_hours,
        pod_total_cost_usd,
        pods,
        split_flag,
        residual_gpu_share
    from joined
)

select * from final
