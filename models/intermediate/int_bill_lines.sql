{{ config(materialized='table') }}
-- Every FOCUS bill line with its day, provider key, resource key and the node-day it belongs to.
-- A line matches a node when its ResourceId is the node's instance id (the last segment of
-- spec.providerID) or ends with '/<instance id>', or equals the providerID path (Azure ARM ids), or
-- its ResourceName is the node name; the best match wins (node_key null: the line belongs to no node).

with bill as (
    select
        cast({{ dbt.date_trunc('day', 'charge_period_start') }} as date) as day,
        {{ provider_of('provider_name') }} as provider,
        coalesce(resource_id, resource_name, '(no resource id)') as resource_key,
        lower(resource_id) as resource_id_lower,
        *
    from {{ ref('stg_billing__focus') }}
),

node_keys as (
    select * from {{ ref('int_node_days') }}
),

line_matches as (
    select
        b.row_hash,
        {%- set match_rank -%}
                case
                    when b.resource_id_lower = k.instance_id then 1
                    when k.provider_path <> '' and b.resource_id_lower = k.provider_path then 2
                    when k.provider_path <> '' and b.resource_id_lower like '%' || k.provider_path then 3
                    when k.provider <> 'azure' and b.resource_id_lower like '%/' || k.instance_id then 4
                    else 5
                end
        {%- endset %}
        {{ arg_min('k.node_key', match_rank) }} as node_key
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

final as (
    select
        b.*,
        m.node_key
    from bill as b
    left join line_matches as m on b.row_hash = m.row_hash
)

select * from final
