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
-- 1,000-node month alone: 19.4 -> 11.4 CPU-s, peak 4.1 -> 2.5 GB). No table keeps a framebuffer
-- histogram now (fct_gpu_device_evidence_hourly); a window's framebuffer evidence is its peak.

with device_rows as {{ not_materialized() }} (
    -- read twice, not materialised: the per-workload sums read the lean columns only, and the lists
    -- are scanned once, by `devices` (alone at 1,000 nodes: 22.2 -> 21.0 CPU-s, peak 5.8 -> 3.9 GB)
    select * from {{ ref('fct_gpu_device_evidence_hourly') }} as src
    {%- if is_incremental() %}
    where {{ incremental_since('src.hour') }}
    {%- endif %}
),

stats as (
    -- one row per workload-hour, with its workload's 64-bit key (macro workload_key): the histogram
    -- merge below groups by (hour, key), not by four text columns, and needs no join of the device rows
    -- to these (the 1,000-node month alone, ~63 M exploded bucket rows: 13.6-13.8 -> 9.7-10.7 CPU-s,
    -- peak 2.6 -> 1.7 GB)
    select
        {{ workload_key() }} as wk,
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
    select hour, {{ workload_key() }} as wk, util_hist from device_rows
),

-- every device's utilisation histogram exploded once, summed per workload-hour and bucket and
-- listed; the quantiles are read off the list (one fold, no window)
util_merged as {{ hist_list(hist_bucket_sums('devices', ['hour', 'wk'], 'util_hist'), ['hour', 'wk']) }},

util_q as {{ hist_quantiles('util_merged', ['hour', 'wk'], {'p50': 0.5, 'p95': 0.95}) }},

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
    left join util_q as uq on s.hour = uq.hour and s.wk = uq.wk
    left join util_merged as um on s.hour = um.hour and s.wk = um.wk
)

select * from final
