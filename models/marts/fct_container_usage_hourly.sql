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

with parts as {{ not_materialized() }} (
    -- not materialised: the file-hour list reads (cluster, hour, source_file) only
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

multi_file as {{ multi_file_hours('parts') }},

keyed as (
    select p.*, coalesce(w.workload, p.pod) as workload
    from parts as p
    left join workloads as w
        on p.cluster = w.cluster and p.namespace = w.namespace and p.pod = w.pod
),

groups as (
    -- one row per workload container-hour, numbered: the histogram merges below group and join by
    -- that number instead of five text columns. `several`: an hour several raw files hold, where a
    -- pod's container-hour can have several parts (in any other hour each part is one pod)
    select
        g.*,
        m.cluster is not null as several
    from (
        select
            cluster, hour, namespace, workload, container,
            count(*) as parts,
            count(pod) as pod_parts,
            cast(sum(samples) as bigint) as samples,
            min(first_ts) as first_ts,
            max(last_ts) as last_ts,
            max(memory_peak_bytes) as memory_peak_bytes,
            row_number() over (order by hour, cluster, namespace, workload, container) as gid
        from keyed
        group by cluster, hour, namespace, workload, container
    ) as g
    left join multi_file as m
        on g.cluster = m.cluster and g.hour = m.hour
),

numbered as (
    -- every (pod, file) part with its group's number
    select g.gid, g.parts, g.several, k.pod, k.memory_peak_bucket, k.cpu_hist
    from keyed as k
    inner join groups as g
        on k.cluster = g.cluster and k.hour = g.hour and k.namespace is not distinct from g.namespace
        and k.workload is not distinct from g.workload and k.container is not distinct from g.container
),

several_per_pod as (
    -- in an hour several raw files hold, each pod's container hour over its parts: the bucket of its
    -- peak. In any other hour a part is the pod's hour as it is (no GROUP BY over every part)
    select gid, pod, max(memory_peak_bucket) as b
    from numbered
    where several or pod is null
    group by gid, pod
),

pod_counts as (
    -- the pods of the groups in those hours (elsewhere: the group's parts with a pod)
    select gid, count(pod) as pods from several_per_pod group by gid
),

memory_rows as (
    select gid, b, count(*) as n
    from (
        select gid, memory_peak_bucket as b from numbered where not several and pod is not null
        union all
        select gid, b from several_per_pod
    ) as per_pod
    where b is not null
    group by gid, b
),

memory_hist as {{ hist_list('memory_rows', ['gid']) }},

cpu_one as (
    -- a group held by one part keeps its list as it is
    select gid, cpu_hist as hist from numbered where parts = 1
),

split as (
    -- the rows of the groups held by more than one (pod, file)
    select gid, cpu_hist from numbered where parts > 1
),

cpu_merged as {{ hist_list(hist_bucket_sums('split', ['gid'], 'cpu_hist'), ['gid']) }},

final as (
    select
        g.cluster,
        g.hour,
        g.namespace,
        g.workload,
        g.container,
        g.samples,
        case when g.several then coalesce(pc.pods, 0) else g.pod_parts end as pods,
        g.first_ts,
        g.last_ts,
        g.memory_peak_bytes,
        coalesce(o.hist, c.hist, {{ empty_list_of_pairs() }}) as cpu_hist,
        coalesce(m.hist, {{ empty_list_of_pairs() }}) as memory_hist
    from groups as g
    left join cpu_one as o
        on g.gid = o.gid
    left join cpu_merged as c
        on g.gid = c.gid
    left join pod_counts as pc
        on g.gid = pc.gid
    left join memory_hist as m
        on g.gid = m.gid
)

select * from final
