{{ incremental_by(['cluster', 'hour']) }}
{{ config(on_schema_change='append_new_columns') }}
-- depends_on: {{ ref('stg_usage__container_hourly') }}
-- Recommender evidence for the VPA-style CPU / memory strategy, per workload container and hour:
-- samples, first / last sample time, peak working set, and two histograms in VPA's exponential
-- buckets (macro vpa_bucket: CPU from var vpa_cpu_first_bucket cores, memory from
-- var vpa_memory_first_bucket bytes, ×var vpa_histogram_ratio): CPU over every sample, memory over
-- each pod's hourly peak (VPA keeps memory peaks per interval, not every sample). Counts, not
-- weights: the recommender applies its own half-life decay per hour, so any window merges exactly.
-- Merged from the lake's hourly rollups (macros/rollups.sql, one row per raw file, pod, container
-- and hour): a pod's peak bucket is the max of its files' (vpa_bucket is monotonic), and a
-- group's CPU histogram is its one row's list, or the per-bucket sums of its rows' lists.

with parts as (
    select src.*
    from {{ landing_input('stg_usage__container_hourly', 'container_usage_hourly') }} as src
    {%- if is_incremental() %}
    where {{ incremental_since('src.hour') }}
    {%- endif %}
),

workloads as (
    select cluster, namespace, pod, {{ arg_max('workload', 'pod_uid') }} as workload
    from {{ ref('int_pod_attributes') }}
    group by cluster, namespace, pod
),

keyed as (
    select p.*, coalesce(w.workload, p.pod) as workload
    from parts as p
    left join workloads as w
        on p.cluster = w.cluster and p.namespace = w.namespace and p.pod = w.pod
),

per_pod as (
    -- each pod's container hour over the raw files that hold it
    select cluster, hour, namespace, workload, container, pod,
           max(memory_peak_bytes) as memory_peak_bytes,
           max(memory_peak_bucket) as memory_peak_bucket
    from keyed
    group by cluster, hour, namespace, workload, container, pod
),

memory_hist as (
    select cluster, hour, namespace, workload, container, {{ struct_list([['b', 'b'], ['n', 'n']]) }} as memory_hist
    from (
        select cluster, hour, namespace, workload, container, memory_peak_bucket as b, count(*) as n
        from per_pod
        where memory_peak_bucket is not null
        group by cluster, hour, namespace, workload, container, memory_peak_bucket
    ) as m
    group by cluster, hour, namespace, workload, container
),

groups as (
    select
        cluster, hour, namespace, workload, container,
        count(*) as parts,
        cast(sum(samples) as bigint) as samples,
        count(distinct pod) as pods,
        min(first_ts) as first_ts,
        max(last_ts) as last_ts,
        max(memory_peak_bytes) as memory_peak_bytes,
        case when count(*) = 1 then any_value(cpu_hist) end as cpu_hist_one
    from keyed
    group by cluster, hour, namespace, workload, container
),

split as (
    -- the rows of the groups held by more than one (pod, file)
    select k.*
    from keyed as k
    inner join groups as g
        on k.cluster = g.cluster and k.hour = g.hour and k.namespace is not distinct from g.namespace
        and k.workload is not distinct from g.workload and k.container is not distinct from g.container
    where g.parts > 1
),

{%- set grp = ['cluster', 'hour', 'namespace', 'workload', 'container'] %}

cpu_merged as {{ hist_list(hist_bucket_sums('split', grp, 'cpu_hist'), grp) }},

final as (
    select
        g.cluster,
        g.hour,
        g.namespace,
        g.workload,
        g.container,
        g.samples,
        g.pods,
        g.first_ts,
        g.last_ts,
        g.memory_peak_bytes,
        coalesce(g.cpu_hist_one, c.hist, {{ empty_list_of_pairs() }}) as cpu_hist,
        coalesce(m.memory_hist, {{ empty_list_of_pairs() }}) as memory_hist
    from groups as g
    left join cpu_merged as c
        on g.cluster = c.cluster and g.hour = c.hour and g.namespace is not distinct from c.namespace
        and g.workload is not distinct from c.workload and g.container is not distinct from c.container
    left join memory_hist as m
        on g.cluster = m.cluster and g.hour = m.hour and g.namespace is not distinct from m.namespace
        and g.workload is not distinct from m.workload and g.container is not distinct from m.container
)

select * from final
