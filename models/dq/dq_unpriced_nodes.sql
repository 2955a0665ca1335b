-- Nodes that had no price (no override annotation and no matching `prices` row) for some hours:
-- costed at 0; their GPU-hours still count. Never blocks the build.
with nodes as (
    select * from {{ ref('fct_node_hourly') }}
    where price_source = 'unpriced'
),

final as (
    select
        cluster,
        node,
        provider,
        region,
        instance_type,
        capacity_type,
        min(hour) as first_hour,
        max(hour) as last_hour,
        count(*) as unpriced_hours,
        sum(coalesce(gpu_capacity, 0) * covered_hours) as gpu_capacity_hours,
        'unpriced' as issue
    from nodes
    group by cluster, node, provider, region, instance_type, capacity_type
)

select * from final
