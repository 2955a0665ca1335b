-- Node-hours whose pods hold more GPU-equivalents than the node has GPUs, or whose pods' cost of a
-- resource exceeds the node's cost of it (overcommit): data-quality errors to investigate (a
-- stale snapshot, a wrong replicas/MIG label); the marts stay conserved through overcommit_cost_usd.
with nodes as (
    select * from {{ ref('fct_node_hourly') }}
),

final as (
    select
        hour,
        cluster,
        node,
        gpu_capacity,
        covered_hours,
        allocated_gpu_hours,
        overallocated_gpu_hours,
        overcommit_gpu_cost_usd,
        overcommit_cpu_cost_usd,
        overcommit_memory_cost_usd,
        overcommit_cost_usd,
        case
            when overallocated_gpu_hours > 1e-9 then 'gpu_overallocated'
            else 'cost_overcommitted'
        end as issue
    from nodes
    where overallocated_gpu_hours > 1e-9 or overcommit_cost_usd > 1e-9
)

select * from final
