{{ incremental_by(['cluster', 'hour']) }}
{{ config(on_schema_change='append_new_columns') }}
-- depends_on: {{ ref('stg_dcgm__gpu_samples') }}
-- Recommender evidence per pod, GPU device (or MIG instance) and hour, from the DCGM samples with
-- the warehouse's clamped utilisation (staging, macros/formulas.sql sample_utilization):
-- sample count, mean / max utilisation, framebuffer used (mean, max) and the device's framebuffer
-- (used + free), and histograms of utilisation and framebuffer used (lists of (bucket b, count n),
-- macros util_bucket / fb_bucket) that merge exactly over any window: the recommender's window
-- p50 / p95 are read off the merged counts (macro hist_quantiles), never percentiles of percentiles.
-- One scan of the samples: the two histograms are two grouping sets of the same GROUP BY.

with samples as (
    select cluster, ts, hostname, gpu, uuid, mig_instance, namespace, pod, utilization, fb_used_mib,
           fb_used_mib + fb_free_mib as fb_total_mib
    from {{ landing_input('stg_dcgm__gpu_samples', 'gpu_samples') }} as src
    where src.pod is not null
    {%- if is_incremental() %}
      and src.ts >= {{ incremental_cutoff_sql('hour', 'src.cluster') }}
    {%- endif %}
),

bucketed as (
    select
        cluster,
        {{ dbt.date_trunc('hour', 'ts') }} as hour,
        hostname,
        coalesce(uuid, cast(gpu as string)) as device_id,
        coalesce(mig_instance, -1) as mig_instance,
        namespace,
        pod,
        utilization,
        fb_used_mib,
        fb_total_mib,
        {{ util_bucket('utilization') }} as ub,
        {{ fb_bucket('fb_used_mib') }} as fbb
    from samples
),

per_bucket as (
    select
        cluster, hour, hostname, device_id, mig_instance, namespace, pod, ub, fbb,
        {{ grouping_bits(['ub', 'fbb']) }} as g,
        count(utilization) as samples,
        sum(utilization) as util_sum,
        max(utilization) as util_max,
        count(fb_used_mib) as fb_samples,
        sum(fb_used_mib) as fb_sum,
        max(fb_used_mib) as fb_used_max_mib,
        max(fb_total_mib) as fb_total_mib
    from bucketed
    group by grouping sets ((cluster, hour, hostname, device_id, mig_instance, namespace, pod, ub),
                            (cluster, hour, hostname, device_id, mig_instance, namespace, pod, fbb))
),

per_device as (
    -- the utilisation grouping set (g = 1: fbb rolled up) carries every sample once
    select
        cluster, hour, hostname, device_id, mig_instance, namespace, pod,
        sum(case when g = 1 then samples end) as samples,
        sum(case when g = 1 then util_sum end) / nullif(sum(case when g = 1 then samples end), 0) as util_mean,
        max(case when g = 1 then util_max end) as util_max,
        sum(case when g = 2 then fb_sum end) / nullif(sum(case when g = 2 then fb_samples end), 0) as fb_used_mean_mib,
        max(fb_used_max_mib) as fb_used_max_mib,
        max(fb_total_mib) as fb_total_mib,
        {{ struct_list([['b', 'ub'], ['n', 'samples']], 'g = 1 and ub is not null') }} as util_hist,
        {{ struct_list([['b', 'fbb'], ['n', 'fb_samples']], 'g = 2 and fbb is not null') }} as fb_hist
    from per_bucket
    group by cluster, hour, hostname, device_id, mig_instance, namespace, pod
),

workloads as (
    -- samples carry the pod's name: its workload (a reused name: the newest UID's)
    select cluster, namespace, pod, {{ arg_max('workload', 'pod_uid') }} as workload
    from {{ ref('int_pod_attributes') }}
    group by cluster, namespace, pod
),

final as (
    select
        d.cluster,
        d.hour,
        d.namespace,
        coalesce(w.workload, d.pod) as workload,
        d.pod,
        d.hostname,
        d.device_id,
        d.mig_instance,
        d.samples,
        d.util_mean,
        d.util_max,
        d.fb_used_mean_mib,
        d.fb_used_max_mib,
        d.fb_total_mib,
        coalesce(d.util_hist, {{ empty_list_of_pairs() }}) as util_hist,
        coalesce(d.fb_hist, {{ empty_list_of_pairs() }}) as fb_hist
    from per_device as d
    left join workloads as w
        on d.cluster = w.cluster and d.namespace = w.namespace and d.pod = w.pod
)

select * from final
