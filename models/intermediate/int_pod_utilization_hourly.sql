-- Per pod per hour: utilisation u of its GPU allocation, from the hourly DCGM aggregate.
-- Samples match pods by (cluster, namespace, pod). A MIG instance's u is relative to the instance,
-- so it is the pod's u directly. Pods sharing one physical GPU (time-slicing, fractional) split its
-- busy time in proportion to their GPU-equivalent: per (device, hour) Σe = Σ over pods with series
-- on the device of their per-device equivalent (min(1, gpu_equiv / number of devices it has series
-- on); the pod's u on that device = min(1, u_device / Σe). A pod's u is the mean over its devices.
-- Only pods whose series overlap in time share: each other pod's equivalent counts in proportion
-- to the part of this pod's time in the hour it overlaps ([first_ts, last_ts] + one sample
-- interval), so two pods that hand a GPU over at :20 each keep their own busy time.
-- Joined and grouped by the hour and two 64-bit keys (macro key_hash; models/README.md "Pod keys"): the pod's
-- (cluster, namespace, pod) and the device's (cluster, hostname, device_id, mig_instance), not by those
-- text columns (the allocation mart at 1,000 nodes: 18 -> 12 CPU-s alone). Test pod_keys_one_to_one.

with usage as {{ not_materialized() }} (
    -- read twice (pod_devices, matched), scanned twice rather than materialised: the allocation mart
    -- alone at 1,000 nodes, a 0.85 GB lower peak and no more CPU (docs/bench.md)
    select *,
           {{ pod_key() }} as pod_key,
           {{ device_key() }} as device_key
    from {{ ref('int_gpu_usage_hourly') }}
    where pod is not null and samples > 0
),

allocation as (
    -- a pod name may be reused by a new UID within the hour: match the name once, summing
    select hour, {{ pod_key() }} as pod_key, sum(gpu_equiv) as gpu_equiv
    from {{ ref('int_pod_allocation_hourly') }}
    where gpu_equiv > 0
    group by hour, {{ pod_key() }}
),

pod_devices as (
    -- the device series of each pod-hour (a GROUP BY and a join: the window count it replaced took 3 of the
    -- allocation mart's 21 CPU-seconds at 1,000 nodes)
    select hour, pod_key, count(*) as devices
    from usage
    group by hour, pod_key
),

matched as (
    select
        u.cluster,
        u.hour,
        u.pod_key,
        u.device_key,
        u.is_mig,
        u.namespace,
        u.pod,
        u.utilization,
        u.samples,
        u.first_ts,
        u.last_ts,
        a.gpu_equiv,
        d.devices
    from usage as u
    inner join allocation as a
        on u.hour = a.hour and u.pod_key = a.pod_key
    inner join pod_devices as d
        on u.hour = d.hour and u.pod_key = d.pod_key
),

device_share as (
    select
        *,
        -- a pod holds at most one whole GPU on any one device
        least(1.0, gpu_equiv / devices) as device_equiv,
        {{ epoch_seconds('last_ts') }} - {{ epoch_seconds('first_ts') }} + {{ var('sample_interval_s', 60) }} as span_s
    from matched
),

shared as (
    select
        p.hour, p.pod_key, p.device_key,
        -- one row of p per group: its other columns as they are
        any_value(p.cluster) as cluster, any_value(p.namespace) as namespace, any_value(p.pod) as pod,
        any_value(p.is_mig) as is_mig, any_value(p.utilization) as utilization, any_value(p.samples) as samples,
        sum(
            q.device_equiv * case
                when p.first_ts is null or q.first_ts is null then 1.0  -- times unknown: assume concurrent
                else greatest(0.0, least({{ epoch_seconds('p.last_ts') }}, {{ epoch_seconds('q.last_ts') }})
                                   - greatest({{ epoch_seconds('p.first_ts') }}, {{ epoch_seconds('q.first_ts') }})
                                   + {{ var('sample_interval_s', 60) }}) / p.span_s
            end
        ) as device_equiv_sum
    from device_share as p
    inner join device_share as q
        on p.hour = q.hour and p.device_key = q.device_key
    group by p.hour, p.pod_key, p.device_key
),

per_device as (
    select
        *,
        case
            when is_mig then utilization
            else least(1.0, utilization / nullif(device_equiv_sum, 0))
        end as pod_device_utilization
    from shared
),

final as (
    select
        hour,
        pod_key,
        any_value(cluster) as cluster,
        any_value(namespace) as namespace,
        any_value(pod) as pod,
        avg(pod_device_utilization) as utilization,
        count(*) as devices,
        sum(samples) as samples
    from per_device
    group by hour, pod_key
)

select * from final
