-- On-demand and spot list price of every priced (provider, region, instance type) at the warehouse's
-- newest hour (fct_node_hourly), each the `prices` row effective then (effective_from <= hour <
-- effective_to; the latest effective_from if several: the rule int_node_costs_hourly prices nodes
-- by), with its effective window. The recommender's move_to_spot reads the spot discount here.

with at_hour as (
    select max(hour) as hour from {{ ref('fct_node_hourly') }}
),

effective as (
    select
        p.provider,
        p.region,
        p.instance_type,
        p.capacity_type,
        a.hour,
        {{ arg_max('p.usd_per_hour', 'p.effective_from') }} as usd_per_hour,
        max(p.effective_from) as effective_from,
        {{ arg_max('p.effective_to', 'p.effective_from') }} as effective_to
    from {{ ref('stg_pricing__prices') }} as p
    cross join at_hour as a
    where p.effective_from <= a.hour and (p.effective_to is null or a.hour < p.effective_to)
    group by p.provider, p.region, p.instance_type, p.capacity_type, a.hour
),

final as (
    select
        provider,
        region,
        instance_type,
        hour as at_hour,
        max(case when capacity_type = 'on_demand' then usd_per_hour end) as on_demand_usd_per_hour,
        max(case when capacity_type = 'on_demand' then effective_from end) as on_demand_effective_from,
        max(case when capacity_type = 'on_demand' then effective_to end) as on_demand_effective_to,
        max(case when capacity_type = 'spot' then usd_per_hour end) as spot_usd_per_hour,
        max(case when capacity_type = 'spot' then effective_from end) as spot_effective_from,
        max(case when capacity_type = 'spot' then effective_to end) as spot_effective_to
    from effective
    group by provider, region, instance_type, hour
)

select * from final
