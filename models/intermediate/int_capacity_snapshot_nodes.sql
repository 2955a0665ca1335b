-- Nodes present in the first snapshot of each hour, with the free CPU their pods leave: the input
-- of the fragmentation and bin-packing view (fct_cluster_capacity_hourly).
with nodes as (
    select * from {{ ref('int_nodes_hourly') }}
    where in_first_snapshot
),

pods as (
    select cluster, hour, node, sum(cpu_request) as cpu_requested, sum(memory_request_gib) as memory_requested_gib
    from {{ ref('int_capacity_snapshot_pods') }}
    group by cluster, hour, node
),

final as (
    select
        n.cluster,
        n.hour,
        n.node,
        coalesce(n.node_pool, '(none)') as node_pool,
        n.gpu_product as gpu_model,
        coalesce(n.gpu_capacity, 0) as gpu_capacity,
        coalesce(n.cpu_allocatable, n.cpu_capacity, 0) as cpu_allocatable,
        coalesce(n.memory_allocatable_gib, n.memory_capacity_gib, 0) as memory_allocatable_gib,
        coalesce(n.cpu_allocatable, n.cpu_capacity, 0) - coalesce(p.cpu_requested, 0) as cpu_free,
        n.unschedulable
    from nodes as n
    left join pods as p
        on n.cluster = p.cluster and n.hour = p.hour and n.node = p.node
)

select * from final
