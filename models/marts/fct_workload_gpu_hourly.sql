{{ incremental_by(['cluster', 'hour']) }}
{{ config(on_schema_change='append_new_columns', post_hook="{{ create_evidence_window_macros() }}") }}
-- Recommender evidence per GPU workload and hour: every workload-hour that held GPUs
-- (fct_gpu_allocation_hourly, gpu_hours > 0: its GPU-hours and cost) with its DCGM evidence summed
-- over its pods and devices (fct_gpu_device_evidence_hourly): samples, mean / p50 / p95 / max
-- utilisation, mean / p50 / p95 / max framebuffer used, the device framebuffer, and the merged
-- histograms. An hour without samples has samples = 0 and null utilisation: unmeasured, never 0 %.

with allocation as (
    select * from {{ ref('fct_gpu_allocation_hourly') }} as src
    where src.gpu_hours > 0
    {%- if is_incremental() %}
      and {{ incremental_since('src.hour') }}
    {%- endif %}
),

devices as (
    select * from {{ ref('fct_gpu_device_evidence_hourly') }} as src
    {%- if is_incremental() %}
    where {{ incremental_since('src.hour') }}
    {%- endif %}
),

workload_hours as (
    select
        cluster,
        namespace,
        workload,
        hour,
        {{ arg_max('tier', 'gpu_hours', tie_break=true) }} as tier,
        {{ arg_max('workload_kind', 'gpu_hours', tie_break=true) }} as workload_kind,
        {{ arg_max('gpu_model', 'gpu_hours', tie_break=true) }} as gpu_model,
        {{ arg_max('gpu_resource', 'gpu_hours', tie_break=true) }} as gpu_resource,
        count(distinct pod) as pods,
        max(gpu_equiv) as gpu_equiv_per_pod,
        sum(gpu_hours) as gpu_hours,
        sum(measured_gpu_hours) as measured_gpu_hours,
        sum(gpu_cost_usd) as gpu_cost_usd,
        sum(total_cost_usd) as total_cost_usd
    from allocation
    group by cluster, namespace, workload, hour
),

stats as (
    select
        cluster, namespace, workload, hour,
        sum(samples) as samples,
        sum(util_mean * samples) / nullif(sum(samples), 0) as util_mean,
        max(util_max) as util_max,
        max(fb_used_max_mib) as fb_used_max_mib,
        max(fb_total_mib) as fb_total_mib,
        count(*) as devices
    from devices
    group by cluster, namespace, workload, hour
),

{%- set wh = ['cluster', 'namespace', 'workload', 'hour'] %}

util_rows as (
    -- every device's histogram exploded once and summed per workload-hour and bucket; the merged
    -- lists and the quantiles are both read off these rows
    select * from {{ hist_bucket_sums('devices', wh, 'util_hist') }} as u
),

fb_rows as (
    select * from {{ hist_bucket_sums('devices', wh, 'fb_hist') }} as f
),

util_merged as {{ hist_list('util_rows', wh) }},

fb_merged as {{ hist_list('fb_rows', wh) }},

util_q as {{ hist_quantiles('util_rows', ['cluster', 'namespace', 'workload', 'hour'], {'p50': 0.5, 'p95': 0.95}) }},

fb_q as {{ hist_quantiles('fb_rows', ['cluster', 'namespace', 'workload', 'hour'], {'p50': 0.5, 'p95': 0.95}) }},

fb_mean as (
    select cluster, namespace, workload, hour,
           sum(fb_used_mean_mib * samples) / nullif(sum(case when fb_used_mean_mib is not null then samples end), 0) as fb_used_mean_mib
    from devices
    group by cluster, namespace, workload, hour
),

final as (
    select
        w.cluster,
        w.hour,
        w.namespace,
        w.workload,
        w.tier,
        w.workload_kind,
        w.gpu_model,
        w.gpu_resource,
        w.pods,
        w.gpu_equiv_per_pod,
        w.gpu_hours,
        w.measured_gpu_hours,
        w.gpu_cost_usd,
        w.total_cost_usd,
        coalesce(s.samples, 0) as samples,
        coalesce(s.devices, 0) as devices,
        s.util_mean,
        {{ util_bucket_value('uq.p50') }} as util_p50,
        {{ util_bucket_value('uq.p95') }} as util_p95,
        s.util_max,
        m.fb_used_mean_mib,
        {{ fb_bucket_value('fq.p50') }} as fb_used_p50_mib,
        {{ fb_bucket_value('fq.p95') }} as fb_used_p95_mib,
        s.fb_used_max_mib,
        s.fb_total_mib,
        coalesce(um.hist, {{ empty_list_of_pairs() }}) as util_hist,
        coalesce(fm.hist, {{ empty_list_of_pairs() }}) as fb_hist
    from workload_hours as w
    left join stats as s
        on w.cluster = s.cluster and w.namespace = s.namespace and w.workload = s.workload and w.hour = s.hour
    left join util_q as uq
        on w.cluster = uq.cluster and w.namespace = uq.namespace and w.workload = uq.workload and w.hour = uq.hour
    left join fb_q as fq
        on w.cluster = fq.cluster and w.namespace = fq.namespace and w.workload = fq.workload and w.hour = fq.hour
    left join util_merged as um
        on w.cluster = um.cluster and w.namespace = um.namespace and w.workload = um.workload and w.hour = um.hour
    left join fb_merged as fm
        on w.cluster = fm.cluster and w.namespace = fm.namespace and w.workload = fm.workload and w.hour = fm.hour
    left join fb_mean as m
        on w.cluster = m.cluster and w.namespace = m.namespace and w.workload = m.workload and w.hour = m.hour
)

select * from final
