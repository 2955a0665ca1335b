{{ config(materialized='incremental', incremental_strategy='delete+insert', unique_key=['cluster', 'hour']) }}
-- depends_on: {{ ref('stg_k8s__nodes') }}
-- One row per node per hour it was seen: covered hours w (exact, from the snapshot timeline) and
-- the node's attributes as of its last snapshot in the hour.
{%- set cap_h = var('snapshot_interval_s') * var('coverage_cap_factor') / 3600 %}

with nodes as (
    select * from {{ landing_input('stg_k8s__nodes', 'k8s_nodes') }}
    {%- if is_incremental() %}
    -- a snapshot up to one cap before the first rebuilt hour can still cover into it
    where snapshot_ts >= {{ incremental_cutoff_sql() }} - {{ hours_interval(cap_h) }}
    {%- endif %}
),

snapshot_hours as (
    select * from {{ ref('int_snapshot_hours') }}
),

joined as (
    select
        n.*,
        h.hour,
        h.covered_s,
        h.is_first_in_hour
    from nodes as n
    inner join snapshot_hours as h
        on n.cluster = h.cluster and n.snapshot_ts = h.snapshot_ts
    {%- if is_incremental() %}
    where h.hour >= {{ incremental_cutoff_sql() }}
    {%- endif %}
),

final as (
    select
        cluster,
        hour,
        node,
        sum(covered_s) / 3600.0 as covered_hours,
        bool_or(is_first_in_hour) as in_first_snapshot,
        max(snapshot_ts) as last_snapshot_ts,
        arg_max(node_uid, snapshot_ts) as node_uid,
        arg_max(provider, snapshot_ts) as provider,
        arg_max(provider_id, snapshot_ts) as provider_id,
        arg_max(instance_type, snapshot_ts) as instance_type,
        arg_max(region, snapshot_ts) as region,
        arg_max(zone, snapshot_ts) as zone,
        arg_max(capacity_type, snapshot_ts) as capacity_type,
        arg_max(node_pool, snapshot_ts) as node_pool,
        arg_max(unschedulable, snapshot_ts) as unschedulable,
        arg_max(gpu_product, snapshot_ts) as gpu_product,
        arg_max(gpu_memory_mib, snapshot_ts) as gpu_memory_mib,
        arg_max(gpu_replicas, snapshot_ts) as gpu_replicas,
        arg_max(mig_config, snapshot_ts) as mig_config,
        arg_max(mig_strategy, snapshot_ts) as mig_strategy,
        -- physical GPUs: the GFD count label, else the device-plugin capacity / replicas, else
        -- other accelerators' capacity
        arg_max(coalesce(
            gpu_count,
            cast(capacity['nvidia.com/gpu'] / greatest(coalesce(gpu_replicas, 1), 1) as integer),
            {%- for r in var('other_accelerator_resources') %}
            cast(capacity['{{ r }}'] as integer),
            {%- endfor %}
            0), snapshot_ts) as gpu_capacity,
        arg_max(capacity['cpu'], snapshot_ts) as cpu_capacity,
        arg_max(capacity['memory'] / 1073741824.0, snapshot_ts) as memory_capacity_gib,
        arg_max(allocatable['cpu'], snapshot_ts) as cpu_allocatable,
        arg_max(allocatable['memory'] / 1073741824.0, snapshot_ts) as memory_allocatable_gib,
        arg_max(try_cast(annotations['{{ var("price_override_annotation") }}'] as double), snapshot_ts)
            as price_override_usd_per_hour
    from joined
    group by cluster, hour, node
)

select * from final
