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

device_rows as (
    select * from {{ ref('fct_gpu_device_evidence_hourly') }} as src
    {%- if is_incremental() %}
    where {{ incremental_since('src.hour') }}
    {%- endif %}
),

workload_hours as (
    -- one row per workload-hour, numbered: the histogram merges below group and partition by that
    -- integer instead of four text columns (the full build at 1,000 nodes: ~40 M exploded bucket rows)
    select
        row_number() over (order by hour, cluster, namespace, workload) as wh_id,
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

devices as (
    -- the device-hours of the workload-hours above (a workload-hour the allocation does not hold is
    -- not in this mart), with their workload-hour's number
    select w.wh_id, d.samples, d.util_mean, d.util_max, d.fb_used_mean_mib, d.fb_used_max_mib, d.fb_total_mib,
           d.util_hist, d.fb_hist
    from device_rows as d
    inner join workload_hours as w
        on d.cluster = w.cluster and d.namespace = w.namespace and d.workload = w.workload and d.hour = w.hour
),

stats as (
    select
        wh_id,
        sum(samples) as samples,
        sum(util_mean * samples) / nullif(sum(samples), 0) as util_mean,
        max(util_max) as util_max,
        max(fb_used_max_mib) as fb_used_max_mib,
        max(fb_total_mib) as fb_total_mib,
        count(*) as devices,
        sum(fb_used_mean_mib * samples) / nullif(sum(case when fb_used_mean_mib is not null then samples end), 0) as fb_used_mean_mib
    from devices
    group by wh_id
),

-- every device's histogram exploded once, summed per workload-hour and bucket and listed; the
-- quantiles are read off the lists (one fold each, no window)
util_merged as {{ hist_list(hist_bucket_sums('devices', ['wh_id'], 'util_hist'), ['wh_id']) }},

fb_merged as {{ hist_list(hist_bucket_sums('devices', ['wh_id'], 'fb_hist'), ['wh_id']) }},

util_q as {{ hist_quantiles('util_merged', ['wh_id'], {'p50': 0.5, 'p95': 0.95}) }},

fb_q as {{ hist_quantiles('fb_merged', ['wh_id'], {'p50': 0.5, 'p95': 0.95}) }},

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
        s.fb_used_mean_mib,
        {{ fb_bucket_value('fq.p50') }} as fb_used_p50_mib,
        {{ fb_bucket_value('fq.p95') }} as fb_used_p95_mib,
        s.fb_used_max_mib,
        s.fb_total_mib,
        coalesce(um.hist, {{ empty_list_of_pairs() }}) as util_hist,
        coalesce(fm.hist, {{ empty_list_of_pairs() }}) as fb_hist
    from workload_hours as w
    left join stats as s on w.wh_id = s.wh_id
    left join util_q as uq on w.wh_id = uq.wh_id
    left join fb_q as fq on w.wh_id = fq.wh_id
    left join util_merged as um on w.wh_id = um.wh_id
    left join fb_merged as fm on w.wh_id = fm.wh_id
)

select * from final
