{{ incremental_by(['cluster', 'hour']) }}
{{ config(on_schema_change='append_new_columns') }}
-- depends_on: {{ ref('stg_dcgm__gpu_hourly') }}
-- DCGM usage per (cluster, hostname, device or MIG instance, namespace, pod, hour), merged from the
-- lake's hourly rollups (macros/rollups.sql: one row per raw file and key), so no build re-reads
-- the per-minute samples. Samples of idle devices (no pod labels) are kept with a null pod.

with parts as (
    select *
    from {{ landing_input('stg_dcgm__gpu_hourly', 'gpu_samples_hourly') }} as src
    {%- if is_incremental() %}
    where {{ incremental_since('src.hour') }}
    {%- endif %}
),

final as (
    select
        cluster,
        hour,
        hostname,
        device_id,
        mig_instance,
        max(mig_profile) as mig_profile,
        bool_or(is_mig) as is_mig,
        namespace,
        pod,
        sum(util_sum) / nullif(sum(samples), 0) as utilization,
        cast(sum(samples) as bigint) as samples,
        -- when in the hour this pod's series on this device ran: pods that hand a GPU over
        -- within an hour did not share it (int_pod_utilization_hourly weighs by overlap)
        min(first_ts) as first_ts,
        max(last_ts) as last_ts
    from parts
    group by cluster, hour, hostname, device_id, mig_instance, namespace, pod
)

select * from final
