-- Nodes present in the first snapshot of each hour, with what their pods request: the input of the
-- fragmentation and bin-packing view (fct_cluster_capacity_hourly). The pods are summed here, once
-- per node, so the Python model reads one row per node-hour instead of one per pod.
with nodes as (
    select * from {{ ref('int_nodes_hourly') }}
    where in_first_snapshot
),

pods as (
    select
        cluster,
        hour,
        node,
        sum(cpu_request) as cpu_requested,
        sum(memory_request_gib) as memory_requested_gib,
        sum(gpu_equiv) as gpu_requested,
        -- the devices whole-GPU pods hold; the other GPU pods are read one by one (their whole and
        -- fractional parts are split in the model)
        sum(case when gpu_equiv > 0 and is_whole then gpu_equiv else 0 end) as whole_pod_gpus,
        sum(case when is_system then 0 else 1 end) as workload_pods
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
        coalesce(p.cpu_requested, 0) as cpu_requested,
        coalesce(p.memory_requested_gib, 0) as memory_requested_gib,
        coalesce(p.gpu_requested, 0) as gpu_requested,
        coalesce(p.whole_pod_gpus, 0) as whole_pod_gpus,
        coalesce(p.workload_pods, 0) as workload_pods,
        n.unschedulable
    from nodes as n
    left join pods as p
        on n.cluster = p.cluster and n.hour = p.hour and n.node = p.node
)

select * from final
