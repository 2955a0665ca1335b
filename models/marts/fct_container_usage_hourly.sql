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
-- group's CPU histogram is the per-bucket sums of its rows' lists.

with parts as {{ not_materialized() }} (
    -- not materialised: the file-hour list reads (cluster, hour, source_file) only, and the parts are
    -- scanned again for their lean columns (`keyed`) and their CPU lists (`part_lists`)
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

with_workload as {{ not_materialized() }} (
    -- every (pod, file) part with its workload. Not materialised: `keyed` reads its lean columns and
    -- `part_lists` its CPU lists, each a scan of the parts of its own
    select p.*, coalesce(w.workload, p.pod) as workload
    from parts as p
    left join workloads as w
        on p.cluster = w.cluster and p.namespace = w.namespace and p.pod = w.pod
),

keyed as (
    -- every part with its group's key (macro container_group_key: the
    -- 64-bit key_hash of cluster, hour, namespace, workload, container), by which the histogram merges
    -- below group and join (tests/dbt/assert_pod_keys_one_to_one fails if two groups share one). No
    -- numbered groups joined back to the parts on five text columns: alone 11.8-13.0 -> 11.1-11.6 CPU-s
    -- and a 4.6 -> 3.3-3.5 GB peak at 1,000 nodes. `several`: an hour several raw files hold, where a pod's
    -- container-hour can have several parts (in any other hour each part is one pod). Without the CPU
    -- lists: four CTEs read this one, so DuckDB materialises it, and copying every part's list into it
    -- cost more than reading the parts again in `part_lists` (alone at 1,000 nodes: 11.7-12.8 ->
    -- 10.7-10.9 CPU-s, peak 3.1 -> 1.2 GB)
    select k.cluster, k.hour, k.namespace, k.pod, k.container, k.samples, k.first_ts, k.last_ts,
           k.memory_peak_bytes, k.memory_peak_bucket, k.workload,
           {{ container_group_key('k') }} as gid,
           m.cluster is not null as several
    from with_workload as k
    left join multi_file as m
        on k.cluster = m.cluster and k.hour = m.hour
),

part_lists as (
    -- every part's CPU list with its group's key, for the merge below
    select {{ container_group_key('k') }} as gid, k.cpu_hist
    from with_workload as k
),

groups as (
    -- one row per workload container-hour
    select
        cluster, hour, namespace, workload, container, gid, several,
        count(pod) as pod_parts,
        cast(sum(samples) as bigint) as samples,
        min(first_ts) as first_ts,
        max(last_ts) as last_ts,
        max(memory_peak_bytes) as memory_peak_bytes
    from keyed
    group by cluster, hour, namespace, workload, container, gid, several
),

several_per_pod as (
    -- in an hour several raw files hold, each pod's container hour over its parts: the bucket of its
    -- peak. In any other hour a part is the pod's hour as it is (no GROUP BY over every part)
    select gid, pod, max(memory_peak_bucket) as b
    from keyed
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
        select gid, memory_peak_bucket as b from keyed where not several and pod is not null
        union all
        select gid, b from several_per_pod
    ) as per_pod
    where b is not null
    group by gid, b
),

memory_hist as {{ hist_list('memory_rows', ['gid']) }},

-- every group's CPU histogram: the per-bucket sums of its parts' lists (a group of one part gets its
-- list back as it was: b is unique in it and hist_list sorts by b)
cpu_merged as {{ hist_list(hist_bucket_sums('part_lists', ['gid'], 'cpu_hist'), ['gid']) }},

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
        coalesce(c.hist, {{ empty_list_of_pairs() }}) as cpu_hist,
        coalesce(m.hist, {{ empty_list_of_pairs() }}) as memory_hist
    from groups as g
    left join cpu_merged as c
        on g.gid = c.gid
    left join pod_counts as pc
        on g.gid = pc.gid
    left join memory_hist as m
        on g.gid = m.gid
)

select * from final
