{{ incremental_by(['cluster', 'hour']) }}
{{ config(on_schema_change='append_new_columns') }}
-- depends_on: {{ ref('stg_usage__container_usage') }}
-- Recommender evidence for the VPA-style CPU / memory strategy, per workload container and hour:
-- samples, first / last sample time, peak working set, and two histograms in VPA's exponential
-- buckets (macro vpa_bucket: CPU from var vpa_cpu_first_bucket cores, memory from
-- var vpa_memory_first_bucket bytes, ×var vpa_histogram_ratio): CPU over every sample, memory over
-- each pod's hourly peak (VPA keeps memory peaks per interval, not every sample). Counts, not
-- weights: the recommender applies its own half-life decay per hour, so any window merges exactly.

with usage as (
    select cluster, ts, namespace, pod, container, cpu_cores, memory_working_set_bytes
    from {{ landing_input('stg_usage__container_usage', 'container_usage') }} as src
    {%- if is_incremental() %}
    where src.ts >= {{ incremental_cutoff_sql('hour', 'src.cluster') }}
    {%- endif %}
),

workloads as (
    select cluster, namespace, pod, {{ arg_max('workload', 'pod_uid') }} as workload
    from {{ ref('int_pod_attributes') }}
    group by cluster, namespace, pod
),

samples as (
    select
        u.cluster,
        {{ dbt.date_trunc('hour', 'u.ts') }} as hour,
        u.namespace,
        coalesce(w.workload, u.pod) as workload,
        u.pod,
        u.container,
        u.ts,
        u.cpu_cores,
        u.memory_working_set_bytes,
        case when u.cpu_cores is not null then {{ vpa_bucket('u.cpu_cores', var('vpa_cpu_first_bucket')) }} end as cb
    from usage as u
    left join workloads as w
        on u.cluster = w.cluster and u.namespace = w.namespace and u.pod = w.pod
),

per_pod as (
    -- one scan: CPU bucket counts (g = 2) and per pod the hour's sample count, times and peak (g = 1)
    select
        cluster, hour, namespace, workload, container, pod, cb,
        {{ grouping_bits(["pod", "cb"]) }} as g,
        count(*) as samples,
        count(cpu_cores) as cpu_samples,
        min(ts) as first_ts,
        max(ts) as last_ts,
        max(memory_working_set_bytes) as memory_peak_bytes
    from samples
    group by grouping sets ((cluster, hour, namespace, workload, container, cb),
                            (cluster, hour, namespace, workload, container, pod))
),

memory_buckets as (
    select cluster, hour, namespace, workload, container,
           {{ vpa_bucket('memory_peak_bytes', var('vpa_memory_first_bucket')) }} as b, count(*) as n
    from per_pod
    where g = 1 and memory_peak_bytes is not null
    group by all
),

memory_hist as (
    select cluster, hour, namespace, workload, container, {{ struct_list([['b', 'b'], ['n', 'n']]) }} as memory_hist
    from memory_buckets
    group by cluster, hour, namespace, workload, container
),

final as (
    select
        p.cluster,
        p.hour,
        p.namespace,
        p.workload,
        p.container,
        sum(case when p.g = 1 then p.samples end) as samples,
        count(distinct p.pod) filter (where p.g = 1) as pods,
        min(p.first_ts) as first_ts,
        max(p.last_ts) as last_ts,
        max(p.memory_peak_bytes) as memory_peak_bytes,
        coalesce({{ struct_list([['b', 'p.cb'], ['n', 'p.cpu_samples']], 'p.g = 2 and p.cb is not null') }},
                 {{ empty_list_of_pairs() }}) as cpu_hist,
        coalesce(any_value(m.memory_hist), {{ empty_list_of_pairs() }}) as memory_hist
    from per_pod as p
    left join memory_hist as m
        on p.cluster = m.cluster and p.hour = m.hour and p.namespace = m.namespace
        and p.workload = m.workload and p.container = m.container
    group by p.cluster, p.hour, p.namespace, p.workload, p.container
)

select * from final
