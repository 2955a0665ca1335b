{{ incremental_by(['cluster', 'hour']) }}
-- depends_on: {{ ref('stg_usage__container_usage') }}
-- CPU cores and working-set GiB per pod per hour: each container's hourly mean, summed over the
-- pod's containers.

with usage as (
    select cluster, ts, namespace, pod, container, cpu_cores, memory_working_set_bytes
    from {{ landing_input('stg_usage__container_usage', 'container_usage') }} as src
    {%- if is_incremental() %}
    where src.ts >= {{ incremental_cutoff_sql('hour', 'src.cluster') }}
    {%- endif %}
),

per_container as (
    select
        cluster,
        {{ dbt.date_trunc('hour', 'ts') }} as hour,
        namespace,
        pod,
        container,
        avg(cpu_cores) as cpu_cores,
        avg(memory_working_set_bytes) as memory_working_set_bytes
    from usage
    group by cluster, {{ dbt.date_trunc('hour', 'ts') }}, namespace, pod, container
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
