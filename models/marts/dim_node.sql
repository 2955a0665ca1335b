-- One row per node (cluster, node): its latest attributes and when it was seen.
with nodes as (
    select * from {{ ref('fct_node_hourly') }}
),

final as (
    select
        cluster,
        node,
        {{ arg_max('node_pool', 'hour') }} as node_pool,
        {{ arg_max('instance_type', 'hour') }} as instance_type,
        {{ arg_max('capacity_type', 'hour') }} as capacity_type,
        {{ arg_max('provider', 'hour') }} as provider,
        {{ arg_max('region', 'hour') }} as region,
        {{ arg_max('gpu_model', 'hour') }} as gpu_model,
        {{ arg_max('gpu_capacity', 'hour') }} as gpu_capacity,
        {{ arg_max('cpu_capacity', 'hour') }} as cpu_capacity,
        {{ arg_max('memory_capacity_gib', 'hour') }} as memory_capacity_gib,
        {{ arg_max('usd_per_hour', 'hour') }} as usd_per_hour,
        {{ arg_max('price_source', 'hour') }} as price_source,
        min(hour) as first_hour,
        max(hour) as last_hour,
        sum(covered_hours) as covered_hours,
        sum(node_cost_usd) as node_cost_usd
    from nodes
    group by cluster, node
)

select * from final
