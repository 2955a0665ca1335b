-- DCGM usage per (cluster, hostname, device or MIG instance, namespace, pod, hour): a view of the pod
-- rows of fct_gpu_device_evidence_hourly and of the idle MIG instances (int_mig_idle_instances_hourly,
-- with a null pod), both merged from the lake's hourly rollups. What reads it: the pods' utilisation
-- (int_pod_utilization_hourly), the MIG layouts (int_mig_layouts_hourly) and the pods' MIG layout
-- lookup (int_pod_allocation_hourly).
-- Until the thirty-first session a table of its own, merged from the same rollups by the same key as the
-- device evidence and written again: at 1,000 nodes × 30 days 6.0 M rows, 3.6 node-seconds of the full
-- build, and 2.2 M of them idle whole GPUs that nothing read (docs/bench.md).

with pods as (
    select
        cluster,
        hour,
        hostname,
        device_id,
        mig_instance,
        mig_profile,
        is_mig,
        namespace,
        pod,
        util_mean as utilization,
        samples,
        first_ts,
        last_ts
    from {{ ref('fct_gpu_device_evidence_hourly') }}
),

idle_mig as (
    select
        cluster,
        hour,
        hostname,
        device_id,
        mig_instance,
        mig_profile,
        true as is_mig,
        namespace,
        cast(null as string) as pod,
        utilization,
        samples,
        first_ts,
        last_ts
    from {{ ref('int_mig_idle_instances_hourly') }}
),

final as (
    select * from pods
    union all
    select * from idle_mig
)

select * from final
