{{ incremental_by(['cluster', 'hour']) }}
-- depends_on: {{ ref('stg_usage__container_hourly') }}
-- CPU cores and working-set GiB per pod per hour: each container's hourly mean (merged from the
-- lake's hourly rollups: sums over counts), summed over the pod's containers.

with parts as (
    select *
    from {{ landing_input('stg_usage__container_hourly', 'container_usage_hourly') }} as src
    {%- if is_incremental() %}
    where {{ incremental_since('src.hour') }}
    {%- endif %}
),

per_container as (
    select
        cluster,
        hour,
        namespace,
        pod,
        container,
        sum(cpu_sum) / nullif(sum(cpu_samples), 0) as cpu_cores,
        sum(memory_sum) / nullif(sum(memory_samples), 0) as memory_working_set_bytes
    from parts
    group by cluster, hour, namespace, pod, container
),

final as (
    select
        cluster,
        hour,
        namespace,
        pod,
        sum(cpu_cores) as cpu_usage_cores,
        sum(memory_working_set_bytes) / 1073741824.0 as memory_usage_gib
    from per_container
    group by cluster, hour, namespace, pod
)

select * from final
