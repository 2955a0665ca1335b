{{ incremental_by(['cluster', 'hour']) }}
-- depends_on: {{ ref('stg_k8s__nodes') }}
-- depends_on: {{ ref('stg_k8s__node_runs') }}
-- depends_on: {{ ref('stg_k8s__nodes_last') }}
-- One row per node per hour it was seen: covered hours w (exact, from the snapshot timeline) and
-- the node's attributes as of its last snapshot in the hour. The covered hours come from the node
-- runs (macros/runs.sql: runs of consecutive snapshots written at landing, the timeline's running
-- sums); the attributes are read off the lake's k8s_nodes_last rollup (each node's last
-- snapshot rows per clock hour and file: the last snapshot covering an hour is the node's last in its
-- own clock hour, since a later one in that clock hour ends its coverage), not every snapshot's maps.
{%- set final_columns = ['cluster', 'hour', 'node', 'covered_hours', 'in_first_snapshot', 'last_snapshot_ts', 'node_uid', 'provider', 'provider_id', 'instance_type', 'region', 'zone', 'capacity_type', 'node_pool', 'unschedulable', 'gpu_product', 'gpu_memory_mib', 'gpu_replicas', 'mig_config', 'mig_strategy', 'gpu_capacity', 'cpu_capacity', 'memory_capacity_gib', 'cpu_allocatable', 'memory_allocatable_gib', 'price_override_usd_per_hour'] %}
{%- set cap_h = var('snapshot_interval_s') * var('coverage_cap_factor') / 3600 %}

with runs as (
    -- node presence as runs of consecutive snapshots per clock hour and raw file (macros/rollups.sql)
    select src.cluster, src.hour, src.node, src.first_ts, src.last_ts, src.snapshots
    from {{ landing_input('stg_k8s__node_runs', 'k8s_node_runs') }} as src
    {%- if is_incremental() %}
    -- a run's snapshots cover up to the cap past its clock hour
    where {{ incremental_since('src.hour', 'hour', minus_hours=cap_h + 1) }}
    {%- endif %}
),

raw_nodes as (
    -- the raw snapshot rows, read only for a node-hour with a run that is not whole (macros/runs.sql)
    select src.cluster, src.snapshot_ts, src.node from {{ landing_input('stg_k8s__nodes', 'k8s_nodes') }} as src
),

last_rows as (
    select * from {{ landing_input('stg_k8s__nodes_last', 'k8s_nodes_last') }} as src
    {%- if is_incremental() %}
    where {{ incremental_since('src.snapshot_ts', 'hour', minus_hours=cap_h) }}
    {%- endif %}
),

snapshot_hours as (
    select * from {{ ref('int_snapshot_hours') }}
),

{{ run_hours_ctes('runs', 'raw_nodes', 'snapshot_hours', ['node']) }},

hourly as (
    select
        c.cluster,
        c.hour,
        c.node,
        sum(c.covered_s) / 3600.0 as covered_hours,
        bool_or(c.is_first_in_hour) as in_first_snapshot,
        max(c.order_ts) as last_snapshot_ts
    from run_contributions as c
    {%- if is_incremental() %}
    where {{ incremental_since('c.hour', 'hour', 'c.cluster') }}
    {%- endif %}
    group by c.cluster, c.hour, c.node
),

attributes as (
    -- attributes at the node's last snapshot in the hour (a join: cheaper than arg_max per column),
    -- read off its maps here, so that the dedupe below carries scalars, not the maps
    select
        h.cluster,
        h.hour,
        h.node,
        h.covered_hours,
        h.in_first_snapshot,
        h.last_snapshot_ts,
        n.node_uid,
        n.provider,
        n.provider_id,
        n.instance_type,
        n.region,
        n.zone,
        n.capacity_type,
        n.node_pool,
        n.unschedulable,
        n.gpu_product,
        n.gpu_memory_mib,
        n.gpu_replicas,
        n.mig_config,
        n.mig_strategy,
        -- physical GPUs: the GFD count label, else the device-plugin capacity / replicas, else
        -- other accelerators' capacity
        coalesce(
            n.gpu_count,
            cast(n.capacity['nvidia.com/gpu'] / greatest(coalesce(n.gpu_replicas, 1), 1) as integer),
            {%- for r in var('other_accelerator_resources') %}
            cast(n.capacity['{{ r }}'] as integer),
            {%- endfor %}
            0) as gpu_capacity,
        n.capacity['cpu'] as cpu_capacity,
        n.capacity['memory'] / 1073741824.0 as memory_capacity_gib,
        n.allocatable['cpu'] as cpu_allocatable,
        n.allocatable['memory'] / 1073741824.0 as memory_allocatable_gib,
        {{ safe_cast("n.annotations['" ~ var('price_override_annotation') ~ "']", 'double') }} as price_override_usd_per_hour
    from hourly as h
    inner join last_rows as n
        on h.cluster = n.cluster and h.node = n.node and h.last_snapshot_ts = n.snapshot_ts
),

final as (
    -- the first node UID if two share the name in one snapshot
    select *, row_number() over (partition by cluster, hour, node order by node_uid nulls last) as row_in_hour
    from attributes
)

select {{ final_columns | join(', ') }} from final where row_in_hour = 1
