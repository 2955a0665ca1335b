-- int_pod_utilization_hourly, int_pod_costs_hourly and int_pod_allocation_hourly (its MIG layout lookup)
-- join pods and GPU devices by the hour and a 64-bit hash of their identity (macros pod_key, device_key):
-- a pod's (cluster, namespace, pod), a device's (cluster, hostname, device_id, mig_instance); and
-- int_workload_gpu_evidence_hourly merges its device rows' histograms by the hour and a workload's
-- (macro workload_key: cluster, namespace, workload), and fct_container_usage_hourly its parts' CPU and
-- memory histograms by a workload container-hour's (macro container_group_key: cluster, hour, namespace,
-- workload, container), one row of the mart each; int_serving_counters_hourly's lag() partitions its parts
-- by a serving series' (macro serving_series_key: cluster, namespace, pod, model). Two identities that
-- shared a key would have their rows joined to (or merged with) each other's. Returns every key that more
-- than one identity of the inputs has (any hour, not only the same one: a stronger check, and cheaper, on
-- each input's distinct identities). None is expected (with 64-bit keys, ~1e-9 for a million
-- identities). An incremental build checks the rows it rebuilt (macros/test_window.sql).

with pods as (
    select distinct cluster, namespace, pod from {{ windowed(ref('int_pod_allocation_hourly')) }} as a
    union
    -- the pod rows of int_gpu_usage_hourly (a view of these and of the idle MIG instances): an
    -- intermediate view, which an hourly build keeps from the live version and does not select
    select distinct cluster, namespace, pod from {{ windowed(ref('fct_gpu_device_evidence_hourly')) }} as g
    union
    select distinct cluster, namespace, pod from {{ windowed(ref('int_container_usage_hourly')) }} as c
),

devices as (
    select distinct cluster, hostname, device_id, mig_instance
    from {{ windowed(ref('fct_gpu_device_evidence_hourly')) }} as g
),

workloads as (
    -- the workloads of the merge's device rows: each has its workload-hours there (10x fewer rows)
    select distinct cluster, namespace, workload from {{ windowed(ref('int_workload_gpu_evidence_hourly')) }} as w
),

container_groups as (
    -- the merge's groups: one row of the mart each
    select cluster, hour, namespace, workload, container from {{ windowed(ref('fct_container_usage_hourly')) }} as c
),

serving_series as (
    select distinct cluster, namespace, pod, model from {{ windowed(ref('int_serving_counters_hourly')) }} as s
),

keys as (
    select 'pod' as kind, {{ pod_key() }} as key_value from pods
    union all
    select 'device' as kind, {{ device_key() }} as key_value from devices
    union all
    select 'workload' as kind, {{ workload_key() }} as key_value from workloads
    union all
    select 'container group' as kind, {{ container_group_key() }} as key_value from container_groups
    union all
    select 'serving series' as kind, {{ serving_series_key() }} as key_value from serving_series
)

select kind, key_value, count(*) as identities
from keys
group by kind, key_value
having count(*) > 1
