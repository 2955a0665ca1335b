{{ incremental_by(['cluster', 'hour']) }}
{{ config(on_schema_change='append_new_columns') }}
-- depends_on: {{ ref('stg_dcgm__gpu_hourly') }}
-- The MIG instances DCGM reported in an hour with no pod (idle GPU instances: dcgm-exporter reports
-- every GPU instance, held or idle), per (cluster, hostname, device, MIG instance, hour), merged from
-- the lake's hourly rollups: their rows that the rollups mark MIG (is_mig), summed over the hour's raw
-- files. int_gpu_usage_hourly adds them to the pod rows of fct_gpu_device_evidence_hourly, so that
-- int_mig_layouts_hourly counts every instance of a GPU's layout. Idle whole GPUs are not kept: nothing
-- reads them.

with parts as (
    select cluster, hour, hostname, device_id, mig_instance, namespace, mig_profile, util_sum, samples, first_ts, last_ts
    from {{ landing_input('stg_dcgm__gpu_hourly', 'gpu_samples_hourly') }} as src
    where src.pod is null and src.is_mig
    {%- if is_incremental() %}
      and {{ incremental_since('src.hour') }}
    {%- endif %}
),

final as (
    select
        cluster,
        hour,
        hostname,
        device_id,
        mig_instance,
        namespace,  -- DCGM's pod labels: null on an idle instance, as the pod
        max(mig_profile) as mig_profile,
        sum(util_sum) / nullif(sum(samples), 0) as utilization,
        cast(sum(samples) as bigint) as samples,
        min(first_ts) as first_ts,
        max(last_ts) as last_ts
    from parts
    group by cluster, hour, hostname, device_id, mig_instance, namespace
)

select * from final
