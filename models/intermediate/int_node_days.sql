{{ config(materialized='table') }}
-- Computed node cost per (day, cluster, node), with the keys a bill line is matched on: the
-- instance id (last segment of spec.providerID) and the providerID path (Azure ARM ids).
-- Read by fct_bill_reconciliation_daily and fct_focus_allocation_daily (one matching rule).

with nodes_daily as (
    select
        cast({{ dbt.date_trunc('day', 'n.hour') }} as date) as day,
        n.cluster,
        n.node,
        n.provider,
        max(n.region) as region,
        max(n.instance_type) as instance_type,
        max(h.provider_id) as provider_id,
        sum(n.unallocated_gpu_hours) as unallocated_gpu_hours,
        sum(n.covered_hours) as covered_hours,
        sum(n.node_cost_usd) as computed_cost_usd
    from {{ ref('fct_node_hourly') }} as n
    left join {{ ref('int_nodes_hourly') }} as h
        on n.cluster = h.cluster and n.hour = h.hour and n.node = h.node
    group by 1, 2, 3, 4
),

final as (
    select
        *,
        cluster || '/' || node as node_key,
        lower(regexp_extract(provider_id, '([^/]+)$', 1)) as instance_id,
        lower(regexp_replace(provider_id, '^[a-z]+://', '')) as provider_path
    from nodes_daily
)

select * from final
