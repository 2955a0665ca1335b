{{ incremental_by(['cluster', 'hour']) }}
{{ config(on_schema_change='append_new_columns') }}
-- depends_on: {{ ref('stg_dcgm__gpu_samples') }}
-- DCGM samples aggregated FIRST to (cluster, hostname, device or MIG instance, namespace, pod,
-- hour): the one big GROUP BY over the largest table; everything downstream works at hour grain.
-- Samples of idle devices (no pod labels) are kept with a null pod.

with samples as (
    select cluster, ts, hostname, gpu, uuid, mig_profile, mig_instance, namespace, pod, utilization
    from {{ landing_input('stg_dcgm__gpu_samples', 'gpu_samples') }} as src
    {%- if is_incremental() %}
    where src.ts >= {{ incremental_cutoff_sql('hour', 'src.cluster') }}
    {%- endif %}
),

final as (
    select
        cluster,
        {{ dbt.date_trunc('hour', 'ts') }} as hour,
        hostname,
        coalesce(uuid, cast(gpu as string)) as device_id,
        coalesce(mig_instance, -1) as mig_instance,
        max(mig_profile) as mig_profile,
        bool_or(mig_profile is not null or mig_instance is not null) as is_mig,
        namespace,
        pod,
        avg(utilization) as utilization,
        count(utilization) as samples,
        -- when in the hour this pod's series on this device ran: pods that hand a GPU over
        -- within an hour did not share it (int_pod_utilization_hourly weighs by overlap)
        min(ts) as first_ts,
        max(ts) as last_ts
    from samples
    group by cluster, {{ dbt.date_trunc('hour', 'ts') }}, hostname, coalesce(uuid, cast(gpu as string)),
             coalesce(mig_instance, -1), namespace, pod
)

select * from final
