{{ incremental_by(['cluster', 'hour']) }}
{{ config(on_schema_change='append_new_columns') }}
-- DCGM evidence per workload and hour, summed over its pods and devices (fct_gpu_device_evidence_hourly):
-- samples, devices, mean / max utilisation, mean / max framebuffer used, the device framebuffer, the
-- merged utilisation histogram and its p50 / p95 (macro hist_quantiles). fct_workload_gpu_hourly joins
-- it to the workload-hours that held GPUs. Its own model (a table), so that the full build merges the
-- histograms while fct_gpu_allocation_hourly is built: it reads the device rows only (the 1,000-node
-- month: the build's longest node, which had waited for the allocation mart).
-- The framebuffer histogram is not merged per workload-hour: nothing reads an hour's framebuffer
-- quantiles (the recommender sizes memory by the peak), and the merge was ~40 % of this model (the
-- 1,000-node month alone: 19.4 -> 11.4 CPU-s, peak 4.1 -> 2.5 GB). A window's framebuffer quantiles are
-- merged from the device rows' lists instead (macros/evidence.sql, gpu_workload_evidence_window).

with device_rows as {{ not_materialized() }} (
    -- read twice, not materialised: the per-workload sums read the lean columns only, and the lists
    -- are scanned once, by `devices` (alone at 1,000 nodes: 22.2 -> 21.0 CPU-s, peak 5.8 -> 3.9 GB)
    select * from {{ ref('fct_gpu_device_evidence_hourly') }} as src
    {%- if is_incremental() %}
    where {{ incremental_since('src.hour') }}
    {%- endif %}
),

stats as (
    -- one row per workload-hour, numbered: the histogram merges below group by that integer instead
    -- of four text columns (the full build at 1,000 nodes: ~120 M exploded bucket rows)
    select
        row_number() over (order by hour, cluster, namespace, workload) as wh_id,
        cluster,
        namespace,
        workload,
        hour,
        sum(samples) as samples,
        sum(util_mean * samples) / nullif(sum(samples), 0) as util_mean,
        max(util_max) as util_max,
        max(fb_used_max_mib) as fb_used_max_mib,
        max(fb_total_mib) as fb_total_mib,
        count(*) as devices,
        sum(fb_used_mean_mib * samples) / nullif(sum(case when fb_used_mean_mib is not null then samples end), 0) as fb_used_mean_mib
    from device_rows
    group by cluster, namespace, workload, hour
),

devices as (
    select s.wh_id, d.util_hist
    from device_rows as d
    inner join stats as s
        on d.cluster = s.cluster and d.namespace = s.namespace and d.workload = s.workload and d.hour = s.hour
),

-- every device's utilisation histogram exploded once, summed per workload-hour and bucket and
-- listed; the quantiles are read off the list (one fold, no window)
util_merged as {{ hist_list(hist_bucket_sums('devices', ['wh_id'], 'util_hist'), ['wh_id']) }},

util_q as {{ hist_quantiles('util_merged', ['wh_id'], {'p50': 0.5, 'p95': 0.95}) }},

final as (
    select
        s.cluster,
        s.hour,
        s.namespace,
        s.workload,
        s.samples,
        s.devices,
        s.util_mean,
        {{ util_bucket_value('uq.p50') }} as util_p50,
        {{ util_bucket_value('uq.p95') }} as util_p95,
        s.util_max,
        s.fb_used_mean_mib,
        s.fb_used_max_mib,
        s.fb_total_mib,
        coalesce(um.hist, {{ empty_list_of_pairs() }}) as util_hist
    from stats as s
    left join util_q as uq on s.wh_id = uq.wh_id
    left join util_merged as um on s.wh_id = um.wh_id
)

select * from final
