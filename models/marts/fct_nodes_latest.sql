{{ incremental_by(['cluster']) }}
{{ config(on_schema_change='append_new_columns') }}
-- depends_on: {{ ref('stg_k8s__nodes') }}
-- Every node of each cluster's latest node snapshot, with what consolidation and packing need
-- (allocatable, labels, taints, GPU shape, capacity type) and its price per hour as the warehouse
-- resolved it (fct_node_hourly.usd_per_hour at the node's newest hour). Incremental per cluster:
-- a run reads only the recent day= partitions (landing_input) and replaces the clusters it saw; a
-- full build reads each cluster's newest day= partition (newest_day_input).

with nodes as {{ not_materialized() }} (
    {%- if is_incremental() %}
    select * from {{ landing_input('stg_k8s__nodes', 'k8s_nodes', 'snapshot_ts') }} as src
    where {{ incremental_since('src.snapshot_ts', 'snapshot_ts') }}
    {%- else %}
    select * from {{ newest_day_input('stg_k8s__nodes', 'k8s_nodes') }} as src
    {%- endif %}
),

latest as (
    select cluster, max(snapshot_ts) as snapshot_ts from nodes group by cluster
),

prices as (
    select cluster, node, {{ arg_max('usd_per_hour', 'hour') }} as usd_per_hour, {{ arg_max('price_source', 'hour') }} as price_source
    from {{ ref('fct_node_hourly') }}
    where hour >= {{ newest_minus_hours(ref('fct_node_hourly'), 3) }}
    group by cluster, node
),

final as (
    select
        n.cluster,
        n.snapshot_ts,
        n.node,
        coalesce(n.node_pool, '(none)') as node_pool,
        n.provider,
        n.region,
        n.instance_type,
        n.capacity_type,
        n.unschedulable,
        coalesce(n.allocatable, n.capacity) as allocatable,
        n.labels,
        n.taints,
        n.gpu_product as gpu_model,
        -- the MIG profile table (seed mig_profiles) that applies to the node's GPU
        {{ gpu_family('n.gpu_product', 'n.gpu_memory_mib') }} as gpu_family,
        coalesce(n.gpu_count, 0) as gpu_count,
        coalesce(n.gpu_memory_mib, 0) as gpu_memory_mib,
        coalesce(n.gpu_replicas, 1) as gpu_replicas,
        n.mig_config,
        n.mig_config is not null
            or {{ any_key_like('coalesce(n.allocatable, n.capacity)', 'nvidia.com/mig-%') }} as is_mig,
        coalesce(p.usd_per_hour, 0.0) as usd_per_hour,
        coalesce(p.price_source, 'unpriced') as price_source,
        row_number() over (partition by n.cluster, n.node order by n.node_uid nulls last) as row_in_node
    from nodes as n
    inner join latest as l
        on n.cluster = l.cluster and n.snapshot_ts = l.snapshot_ts
    left join prices as p
        on n.cluster = p.cluster and n.node = p.node
)

select cluster, snapshot_ts, node, node_pool, provider, region, instance_type, capacity_type, unschedulable, allocatable, labels, taints, gpu_model, gpu_family, gpu_count, gpu_memory_mib, gpu_replicas, mig_config, is_mig, usd_per_hour, price_source
from final
where row_in_node = 1
