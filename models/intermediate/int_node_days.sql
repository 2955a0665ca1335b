{{ incremental_by(['cluster', 'day'], ['cluster', 'day']) }}
-- Computed node cost per (day, cluster, node), with the keys a bill line is matched on: the
-- instance id (last segment of spec.providerID) and the providerID path (Azure ARM ids).
-- Read by fct_bill_reconciliation_daily and fct_focus_allocation_daily (one matching rule).
-- Incremental: delete+insert per (cluster, day), whole days from the cluster's newest day minus the
-- lookback (as int_workload_node_daily): the hourly build no longer re-reads the month's node-hours.

with node_hours as (
    select * from {{ ref('fct_node_hourly') }} as src
    {%- if is_incremental() %}
    where {{ incremental_since('src.hour', 'day', day=true) }}
    {%- endif %}
),

node_ids as (
    select cluster, hour, node, provider_id from {{ ref('int_nodes_hourly') }} as src
    {%- if is_incremental() %}
    where {{ incremental_since('src.hour', 'day', day=true) }}
    {%- endif %}
),

nodes_daily as (
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
    from node_hours as n
    left join node_ids as h
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
