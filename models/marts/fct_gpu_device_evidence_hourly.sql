{{ incremental_by(['cluster', 'hour']) }}
{{ config(on_schema_change='append_new_columns') }}
-- depends_on: {{ ref('stg_dcgm__gpu_hourly') }}
-- Recommender evidence per pod, GPU device (or MIG instance) and hour, from the DCGM samples with
-- the warehouse's clamped utilisation (staging, macros/formulas.sql sample_utilization):
-- sample count, mean / max utilisation, framebuffer used (mean, max) and the device's framebuffer
-- (used + free), and the histogram of utilisation (a list of (bucket b, count n), macro util_bucket)
-- that merges exactly over any window: the recommender's window p50 / p95 are read off the merged
-- counts (macro hist_quantiles), never percentiles of percentiles.
-- No framebuffer histogram: nothing reads a framebuffer quantile (the recommender sizes GPU memory by
-- the peak, fb_used_max_mib), and copying and merging that list was ~28 % of this model (the
-- 1,000-node month alone: 12.1-12.7 -> 8.8-9.2 CPU-s, peak 1.4 -> 1.0 GB). The lake's hourly rollups
-- still hold it (fb_hist), should a framebuffer quantile be wanted.
-- It also holds what int_gpu_usage_hourly (a view of these rows and the idle MIG instances) needs: the
-- MIG profile, is_mig and the first / last sample time. Until the thirty-first session that was a
-- table of its own, merged from the same rollups with the same key, and written again (the 1,000-node
-- month: 3.8 M pod rows and 2.2 M idle-device rows nothing read).
-- Merged from the lake's hourly rollups (macros/rollups.sql: one row per raw file and key): in an
-- hour that one file holds, each key's row and lists are kept as they are (no GROUP BY carrying the
-- lists: the full build's largest cost at 1,000 nodes); in an hour several files hold (two runs
-- within the hour), a key's rows sum per bucket (macro multi_file_hours).

{%- set key = ['cluster', 'hour', 'hostname', 'device_id', 'mig_instance', 'namespace', 'pod'] %}

with workloads as (
    -- samples carry the pod's name: its workload (a reused name: the newest UID's)
    select cluster, namespace, pod, {{ arg_max('workload', 'pod_uid') }} as workload
    from {{ ref('int_pod_attributes') }}
    group by cluster, namespace, pod
),

parts as {{ not_materialized() }} (
    -- each rollup row with its workload, joined here on the lean rows rather than after the merge
    -- (there the 3.8 M device-hours with their lists became the join's build side at 1,000 nodes).
    -- Not materialised: the file-hour list below reads only (cluster, hour, file); the rows with
    -- their lists are read once more by `single` (alone, 11.5 -> 6.7 s and a 5.7 -> 1.3 GB peak)
    select src.*,
           coalesce(w.workload, src.pod) as workload
    from {{ landing_input('stg_dcgm__gpu_hourly', 'gpu_samples_hourly') }} as src
    left join workloads as w
        on src.cluster = w.cluster and src.namespace = w.namespace and src.pod = w.pod
    where src.pod is not null
    {%- if is_incremental() %}
      and {{ incremental_since('src.hour') }}
    {%- endif %}
),

multi_file as {{ multi_file_hours('parts') }},

-- an hour one raw file holds: each key's row is the device-hour as it is
single as {{ file_hour_rows('parts', 'multi_file', several=false) }},

-- an hour several files hold (two runs within the hour): merged by the key below
split as {{ file_hour_rows('parts', 'multi_file', several=true) }},

util_merged as {{ hist_list(hist_bucket_sums('split', key, 'util_hist'), key) }},

split_devices as (
    select
        {{ key | join(', ') }},
        cast(sum(samples) as bigint) as samples,
        sum(util_sum) / nullif(sum(samples), 0) as util_mean,
        max(util_max) as util_max,
        sum(fb_sum) / nullif(sum(fb_samples), 0) as fb_used_mean_mib,
        max(fb_used_max_mib) as fb_used_max_mib,
        max(fb_total_mib) as fb_total_mib,
        max(workload) as workload,  -- one per (cluster, namespace, pod)
        max(mig_profile) as mig_profile,
        bool_or(is_mig) as is_mig,
        min(first_ts) as first_ts,
        max(last_ts) as last_ts
    from split
    group by {{ key | join(', ') }}
),

per_device as (
    select
        {{ key | join(', ') }},
        cast(samples as bigint) as samples,
        util_sum / nullif(samples, 0) as util_mean,
        util_max,
        fb_sum / nullif(fb_samples, 0) as fb_used_mean_mib,
        fb_used_max_mib,
        fb_total_mib,
        util_hist,
        workload,
        mig_profile,
        is_mig,
        first_ts,
        last_ts
    from single
    union all
    select
        {% for k in key %}d.{{ k }}, {% endfor %}
        d.samples, d.util_mean, d.util_max, d.fb_used_mean_mib, d.fb_used_max_mib, d.fb_total_mib,
        coalesce(um.hist, {{ empty_list_of_pairs() }}) as util_hist,
        d.workload, d.mig_profile, d.is_mig, d.first_ts, d.last_ts
    from split_devices as d
    left join util_merged as um
        on {% for k in key %}d.{{ k }} is not distinct from um.{{ k }}{{ ' and ' if not loop.last }}{% endfor %}
),

final as (
    select
        d.cluster,
        d.hour,
        d.namespace,
        d.workload,
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
        -- for int_gpu_usage_hourly, a view of these rows: the MIG profile, and when in the hour the
        -- pod's series on this device ran (int_pod_utilization_hourly weighs pods by overlap)
        d.mig_profile,
        d.is_mig,
        d.first_ts,
        d.last_ts
    from per_device as d
)

select * from final
