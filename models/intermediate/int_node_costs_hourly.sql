-- Per node per hour: its price p ($/h) and where it came from, the per-GPU / per-core / per-GiB
-- hourly rates, and the node's cost over its covered hours split by resource.
-- Price: the node annotation override wins; else the `prices` row of the same (provider, region,
-- instance_type, capacity_type) effective at the hour (the latest effective_from if several);
-- else 0 and flagged unpriced (dq_unpriced_nodes) — GPU-hours still count.
-- Split of the price over GPU / CPU / memory (var split_method; models/README.md "Price split"):
-- a known gpu_usd_per_hour wins; else `residual` gives the GPUs what is left of the instance type's
-- on-demand list price once its vCPUs and GiB are priced at the provider's reference rates
-- (seeds/reference_rates.csv, by provider, region and machine family, the latest effective_from at
-- the hour, else the earliest row); where there are no rates, or the GPU share would be below var
-- residual_floor_fraction, the weights apply and split_flag says why (dq_price_split).
{%- set residual = var('split_method', 'residual') == 'residual' %}
-- A table, incremental per cluster-hour, not a view: the cost chain under fct_gpu_allocation_hourly,
-- fct_node_hourly and five data tests read it, and each read of a view evaluated its joins again.
{{ incremental_by(['cluster', 'hour']) }}

with nodes_hourly as (
    select * from {{ ref('int_nodes_hourly') }} as src
    {%- if is_incremental() %}
    where {{ incremental_since('src.hour') }}
    {%- endif %}
),

prices as (
    select * from {{ ref('stg_pricing__prices') }}
),

reference_rates as (
    select * from {{ ref('reference_rates') }}
),

priced as (
    select
        n.cluster,
        n.hour,
        n.node,
        {{ arg_max('p.usd_per_hour', 'p.effective_from') }} filter (where p.capacity_type = n.capacity_type) as list_usd_per_hour,
        {{ arg_max('p.gpu_usd_per_hour', 'p.effective_from') }} filter (where p.capacity_type = n.capacity_type) as gpu_usd_per_hour,
        {{ arg_max('p.usd_per_hour', 'p.effective_from') }} filter (where p.capacity_type = 'on_demand') as on_demand_usd_per_hour
    from nodes_hourly as n
    inner join prices as p
        on n.provider = p.provider
        and n.region = p.region
        and n.instance_type = p.instance_type
        and (p.capacity_type = n.capacity_type or p.capacity_type = 'on_demand')
        and p.effective_from <= n.hour
        and (p.effective_to is null or n.hour < p.effective_to)
    group by n.cluster, n.hour, n.node
),

with_price as (
    select
        n.*,
        coalesce(n.price_override_usd_per_hour, pr.list_usd_per_hour, 0.0) as usd_per_hour,
        case when n.price_override_usd_per_hour is null then pr.gpu_usd_per_hour end as gpu_usd_per_hour,
        pr.on_demand_usd_per_hour,
        case
            when n.price_override_usd_per_hour is not null then 'override'
            when pr.list_usd_per_hour is not null then 'price_list'
            else 'unpriced'
        end as price_source
    from nodes_hourly as n
    left join priced as pr
        on n.cluster = pr.cluster and n.hour = pr.hour and n.node = pr.node
),

reference_keys as (
    -- what a node's reference rates depend on: ranked once per (provider, region, instance type, hour),
    -- not per node-hour with every column of the node in the window's sort (the 1,000-node month
    -- alone: 3.9 -> 2.1-2.2 CPU-s)
    select distinct provider, region, instance_type, hour
    from with_price
),

reference_candidates as (
    -- the provider's reference rates for the node: its machine family's row (GCP names the family
    -- before the first '-') over the region's '*' row; at the hour, else the earliest known
    select
        k.*,
        {%- if residual %}
        r.vcpu_usd_per_hour as ref_vcpu_usd_per_hour,
        r.gib_usd_per_hour as ref_gib_usd_per_hour
        {%- else %}
        cast(null as double) as ref_vcpu_usd_per_hour,
        cast(null as double) as ref_gib_usd_per_hour
        {%- endif %},
        row_number() over (
            partition by k.provider, k.region, k.instance_type, k.hour
            order by (r.machine_family = '*') nulls last, (r.effective_from <= k.hour) desc nulls last,
                     case when r.effective_from <= k.hour then r.effective_from end desc nulls last, r.effective_from nulls last
        ) as reference_rank
    from reference_keys as k
    left join reference_rates as r
        on k.provider = r.provider
        and k.region = r.region
        and (r.machine_family = '*' or r.machine_family = split_part(k.instance_type, '-', 1))
),

with_reference as (
    -- every node-hour has its key's rank-1 row (a key without rates: one row of nulls)
    select w.*, rc.ref_vcpu_usd_per_hour, rc.ref_gib_usd_per_hour, rc.reference_rank
    from with_price as w
    left join (select * from reference_candidates where reference_rank = 1) as rc
        on w.provider is not distinct from rc.provider
        and w.region is not distinct from rc.region
        and w.instance_type is not distinct from rc.instance_type
        and w.hour = rc.hour
),

shares as (
    select
        *,
        {{ residual_gpu_share('coalesce(on_demand_usd_per_hour, usd_per_hour)', 'gpu_capacity', 'cpu_capacity',
                              'memory_capacity_gib', 'ref_vcpu_usd_per_hour', 'ref_gib_usd_per_hour') }} as residual_gpu_share
    from with_reference
),

with_split as (
    select
        *,
        case
            when gpu_usd_per_hour is not null and coalesce(gpu_capacity, 0) > 0
                 and coalesce(cpu_capacity, 0) + coalesce(memory_capacity_gib, 0) > 0 then 'gpu_price'
            {%- if residual %}
            when residual_gpu_share is null then 'weights'
            when coalesce(gpu_capacity, 0) > 0 and residual_gpu_share < {{ var('residual_floor_fraction', 0.1) }} then 'weights'
            else 'residual'
            {%- else %}
            else 'weights'
            {%- endif %}
        end as split_method,
        case
            {%- if residual %}
            when gpu_usd_per_hour is not null or coalesce(gpu_capacity, 0) <= 0 or usd_per_hour <= 0 then null
            when ref_vcpu_usd_per_hour is null then 'no_reference_rate'
            when residual_gpu_share < {{ var('residual_floor_fraction', 0.1) }} then 'residual_below_floor'
            {%- else %}
            when false then cast(null as string)
            {%- endif %}
        end as split_flag
    from shares
),

rates as (
    select
        *,
        {%- for kind, col in [('gpu', 'gpu_rate_usd'), ('cpu', 'core_rate_usd'), ('memory', 'gib_rate_usd')] %}
        {{ node_rate(kind, 'usd_per_hour', 'gpu_usd_per_hour', 'gpu_capacity', 'cpu_capacity', 'memory_capacity_gib',
                     'split_method', 'residual_gpu_share', 'ref_vcpu_usd_per_hour', 'ref_gib_usd_per_hour') }} as {{ col }}
        {{- "," if not loop.last }}
        {%- endfor %}
    from with_split
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
