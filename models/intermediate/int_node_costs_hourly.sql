-- Per node per hour: its price p ($/h) and where it came from, the per-GPU / per-core / per-GiB
-- hourly rates, and the node's cost over its covered hours split by resource.
-- Price: the node annotation override wins; else the `prices` row of the same (provider, region,
-- instance_type, capacity_type) effective at the hour (the latest effective_from if several);
-- else 0 and flagged unpriced (dq_unpriced_nodes) — GPU-hours still count.

with nodes_hourly as (
    select * from {{ ref('int_nodes_hourly') }}
),

prices as (
    select * from {{ ref('stg_pricing__prices') }}
),

priced as (
    select
        n.cluster,
        n.hour,
        n.node,
        arg_max(p.usd_per_hour, p.effective_from) as list_usd_per_hour,
        arg_max(p.gpu_usd_per_hour, p.effective_from) as gpu_usd_per_hour
    from nodes_hourly as n
    inner join prices as p
        on n.provider = p.provider
        and n.region = p.region
        and n.instance_type = p.instance_type
        and n.capacity_type = p.capacity_type
        and p.effective_from <= n.hour
        and (p.effective_to is null or n.hour < p.effective_to)
    group by n.cluster, n.hour, n.node
),

with_price as (
    select
        n.*,
        coalesce(n.price_override_usd_per_hour, pr.list_usd_per_hour, 0.0) as usd_per_hour,
        case when n.price_override_usd_per_hour is null then pr.gpu_usd_per_hour end as gpu_usd_per_hour,
        case
            when n.price_override_usd_per_hour is not null then 'override'
            when pr.list_usd_per_hour is not null then 'price_list'
            else 'unpriced'
        end as price_source
    from nodes_hourly as n
    left join priced as pr
        on n.cluster = pr.cluster and n.hour = pr.hour and n.node = pr.node
),

rates as (
    select
        *,
        {{ node_rate('gpu', 'usd_per_hour', 'gpu_usd_per_hour', 'gpu_capacity', 'cpu_capacity', 'memory_capacity_gib') }} as gpu_rate_usd,
        {{ node_rate('cpu', 'usd_per_hour', 'gpu_usd_per_hour', 'gpu_capacity', 'cpu_capacity', 'memory_capacity_gib') }} as core_rate_usd,
        {{ node_rate('memory', 'usd_per_hour', 'gpu_usd_per_hour', 'gpu_capacity', 'cpu_capacity', 'memory_capacity_gib') }} as gib_rate_usd
    from with_price
),

final as (
    select
        *,
        usd_per_hour * covered_hours as node_cost_usd,
        gpu_rate_usd * coalesce(gpu_capacity, 0) * covered_hours as node_gpu_cost_usd,
        core_rate_usd * coalesce(cpu_capacity, 0) * covered_hours as node_cpu_cost_usd,
        gib_rate_usd * coalesce(memory_capacity_gib, 0) * covered_hours as node_memory_cost_usd
    from rates
)

select * from final
