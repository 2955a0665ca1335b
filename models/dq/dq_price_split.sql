-- GPU nodes whose price the residual method could not split (split_method residual): no reference
-- rates for their provider / region ('no_reference_rate'), or a GPU share below var
-- residual_floor_fraction ('residual_below_floor'). Their hours are split by the weights instead.
-- Listed, never blocking; empty with split_method = weights.
-- Read from fct_node_hourly (a table, which carries the flag and the share): when int_node_costs_hourly
-- was a view, its chain over the whole history cost the hourly build ~4.8 s at 1,000 nodes x 30 days.
with nodes as (
    select * from {{ ref('fct_node_hourly') }}
    where split_flag is not null
),

final as (
    select
        cluster,
        node,
        provider,
        region,
        instance_type,
        capacity_type,
        split_flag as issue,
        min(hour) as first_hour,
        max(hour) as last_hour,
        count(*) as hours,
        min(residual_gpu_share) as residual_gpu_share,
        sum(node_cost_usd) as node_cost_usd
    from nodes
    group by cluster, node, provider, region, instance_type, capacity_type, split_flag
)

select * from final
