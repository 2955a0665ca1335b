-- Computed node cost reconciled to the FOCUS bill per (day, provider, resource_id).
-- Bill lines are matched to node-days in int_bill_lines (the one matching rule). Unmatched bill
-- lines stay (only_in_bill); nodes with no line on a (day, provider) the bill covers are only_computed. difference = computed − effective cost;
-- beyond max(bill_tolerance_usd, bill_tolerance_pct × computed) the status is mismatch.

with bill as (
    select * from {{ ref('int_bill_lines') }}
),

node_keys as (
    select * from {{ ref('int_node_days') }}
),

bill_resources as (
    select
        b.day,
        b.provider,
        b.resource_key as resource_id,
        max(b.node_key) as node_key,
        sum(b.billed_cost) as billed_cost_usd,
        sum(b.effective_cost) as effective_cost_usd
    from bill as b
    group by b.day, b.provider, b.resource_key
),

computed as (
    select day, provider, node_key, coalesce(instance_id, node) as instance_id,
           computed_cost_usd
    from node_keys
),

matched_keys as (
    select distinct day, node_key from bill_resources where node_key is not null
),

bill_days as (
    select distinct day, provider from bill
),

joined as (
    select
        r.day,
        r.provider,
        r.resource_id,
        c.computed_cost_usd,
        r.billed_cost_usd,
        r.effective_cost_usd
    from bill_resources as r
    left join computed as c
        on r.day = c.day and r.node_key = c.node_key
    union all
    select
        c.day,
        c.provider,
        c.instance_id as resource_id,
        c.computed_cost_usd,
        null as billed_cost_usd,
        null as effective_cost_usd
    from computed as c
    inner join bill_days as d
        on c.day = d.day and c.provider = d.provider
    where not exists (select 1 from matched_keys as m where m.day = c.day and m.node_key = c.node_key)
),

final as (
    select
        day,
        provider,
        resource_id,
        computed_cost_usd,
        billed_cost_usd,
        effective_cost_usd,
        coalesce(computed_cost_usd, 0) - coalesce(effective_cost_usd, 0) as difference_usd,
        case
            when computed_cost_usd is null then 'only_in_bill'
            when effective_cost_usd is null and billed_cost_usd is null then 'only_computed'
            when abs(coalesce(computed_cost_usd, 0) - coalesce(effective_cost_usd, 0))
                 <= greatest({{ var('bill_tolerance_usd') }}, {{ var('bill_tolerance_pct') }} * abs(computed_cost_usd))
                then 'matched'
            else 'mismatch'
        end as status
    from joined
)

select * from final
