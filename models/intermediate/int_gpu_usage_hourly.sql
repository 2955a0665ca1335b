{{ incremental_by(['cluster', 'hour']) }}
{{ config(on_schema_change='append_new_columns') }}
-- depends_on: {{ ref('stg_dcgm__gpu_hourly') }}
-- DCGM usage per (cluster, hostname, device or MIG instance, namespace, pod, hour), merged from the
-- lake's hourly rollups (macros/rollups.sql: one row per raw file and key), so no build re-reads
-- the per-minute samples. Samples of idle devices (no pod labels) are kept with a null pod. Only the
-- hours that several files hold are merged (macro multi_file_hours); the rest pass through.

with parts as {{ not_materialized() }} (
    -- not materialised: the file-hour list reads (cluster, hour, source_file) only, and each half of
    -- the union below reads the Parquet once more with its own filter (the 1,000-node month alone:
    -- 4.9 -> 4.0-4.2 CPU-s, peak 2.0-2.2 -> 0.48 GB)
    select cluster, hour, hostname, device_id, mig_instance, mig_profile, is_mig, namespace, pod,
           util_sum, samples, first_ts, last_ts, source_file
    from {{ landing_input('stg_dcgm__gpu_hourly', 'gpu_samples_hourly') }} as src
    {%- if is_incremental() %}
    where {{ incremental_since('src.hour') }}
    {%- endif %}
),

multi_file as {{ multi_file_hours('parts') }},

keys as (
    -- an hour one file holds has each key once (a rollup file holds a key once): its row as it is
    select cluster, hour, hostname, device_id, mig_instance, mig_profile, is_mig, namespace, pod,
           util_sum, samples, first_ts, last_ts
    from {{ file_hour_rows('parts', 'multi_file', several=false) }} as p
    union all
    -- an hour several files hold: a key's rows summed over its files
    select cluster, hour, hostname, device_id, mig_instance, max(mig_profile) as mig_profile,
           bool_or(is_mig) as is_mig, namespace, pod, sum(util_sum) as util_sum, sum(samples) as samples,
           min(first_ts) as first_ts, max(last_ts) as last_ts
    from {{ file_hour_rows('parts', 'multi_file', several=true) }} as x
    group by cluster, hour, hostname, device_id, mig_instance, namespace, pod
),

final as (
    select
        cluster,
        hour,
        hostname,
        device_id,
        mig_instance,
        mig_profile,
        is_mig,
        namespace,
        pod,
        util_sum / nullif(samples, 0) as utilization,
        cast(samples as bigint) as samples,
        -- when in the hour this pod's series on this device ran: pods that hand a GPU over
        -- within an hour did not share it (int_pod_utilization_hourly weighs by overlap)
        first_ts,
        last_ts
    from keys
)

select * from final
