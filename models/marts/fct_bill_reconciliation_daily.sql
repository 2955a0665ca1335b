-- Computed node cost reconciled to the FOCUS bill per (day, provider, resource_id).
-- A bill line matches a node when its ResourceId is the node's instance id (the last segment of
-- spec.providerID) or ends with '/<instance id>', or equals the providerID path (Azure ARM ids), or
-- its ResourceName is the node name. Unmatched bill lines stay (only_in_bill); nodes with no line on
-- a (day, provider) the bill covers are only_computed. difference = computed − effective cost;
-- beyond max(bill_tolerance_usd, bill_tolerance_pct × computed) the status is mismatch.

with bill as (
    select
        cast({{ dbt.date_trunc('day', 'charge_period_start') }} as date) as day,
        {{ provider_of('provider_name') }} as provider,
        coalesce(resource_id, resource_name, '(no resource id)') as resource_id,
        lower(resource_id) as resource_id_lower,
        resource_name,
        billed_cost,
        effective_cost,
        row_hash
    from {{ ref('stg_billing__focus') }}
),

nodes_daily as (
    select
        cast({{ dbt.date_trunc('day', 'n.hour') }} as date) as day,
        n.cluster,
        n.node,
        n.provider,
        max(h.provider_id) as provider_id,
        sum(n.node_cost_usd) as computed_cost_usd
    from {{ ref('fct_node_hourly') }} as n
    left join {{ ref('int_nodes_hourly') }} as h
        on n.cluster = h.cluster and n.hour = h.hour and n.node = h.node
    group by 1, 2, 3, 4
),

node_keys as (
    select
        *,
        lower(regexp_extract(provider_id, '([^/]+)$', 1)) as instance_id,
        lower(regexp_replace(provider_id, '^[a-z]+://', '')) as provider_path
    from nodes_daily
),

line_matches as (
    select
        b.row_hash,
        arg_min(k.cluster || '/' || k.node,
                case
                    when b.resource_id_lower = k.instance_id then 1
                    when k.provider_path <> '' and b.resource_id_lower = k.provider_path then 2
                    when k.provider_path <> '' and b.resource_id_lower like '%' || k.provider_path then 3
                    when k.provider <> 'azure' and b.resource_id_lower like '%/' || k.instance_id then 4
                    else 5
                end) as node_key
    from bill as b
    inner join node_keys as k
        on b.day = k.day
        and (
            b.resource_id_lower = k.instance_id
            or (k.provider_path <> '' and b.resource_id_lower = k.provider_path)
            or (k.provider_path <> '' and b.resource_id_lower like '%' || k.provider_path)
            or (k.provider <> 'azure' and length(k.instance_id) >= 4 and b.resource_id_lower like '%/' || k.instance_id)
            or b.resource_name = k.node
        )
    group by b.row_hash
),

bill_resources as (
    select
        b.day,
        b.provider,
        b.resource_id,
        max(m.node_key) as node_key,
        sum(b.billed_cost) as billed_cost_usd,
        sum(b.effective_cost) as effective_cost_usd
    from bill as b
    left join line_matches as m on b.row_hash = m.row_hash
    group by b.day, b.provider, b.resource_id
),

computed as (
    select day, provider, cluster || '/' || node as node_key, coalesce(instance_id, node) as instance_id,
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
