{{ incremental_by(['cluster', 'hour']) }}
-- depends_on: {{ ref('stg_usage__container_hourly') }}
-- CPU cores and working-set GiB per pod per hour: each container's hourly mean (merged from the
-- lake's hourly rollups: sums over counts; only the hours several files hold are merged, macro
-- multi_file_hours), summed over the pod's containers.

with parts as {{ not_materialized() }} (
    -- not materialised: the file-hour list reads (cluster, hour, source_file) only, and each half of
    -- the union below reads the Parquet once more with its own filter (the 1,000-node month alone:
    -- 4.6-4.8 -> 3.9 CPU-s, peak 1.8 -> 0.95 GB)
    select cluster, hour, namespace, pod, container, cpu_sum, cpu_samples, memory_sum, memory_samples, source_file
    from {{ landing_input('stg_usage__container_hourly', 'container_usage_hourly') }} as src
    {%- if is_incremental() %}
    where {{ incremental_since('src.hour') }}
    {%- endif %}
),

multi_file as {{ multi_file_hours('parts') }},

sums as (
    -- an hour one file holds has each container once: its row as it is
    select cluster, hour, namespace, pod, container, cpu_sum, cpu_samples, memory_sum, memory_samples
    from {{ file_hour_rows('parts', 'multi_file', several=false) }} as p
    union all
    -- an hour several files hold: each container's sums and counts added over the files
    select cluster, hour, namespace, pod, container,
           sum(cpu_sum) as cpu_sum, sum(cpu_samples) as cpu_samples,
           sum(memory_sum) as memory_sum, sum(memory_samples) as memory_samples
    from {{ file_hour_rows('parts', 'multi_file', several=true) }} as x
    group by cluster, hour, namespace, pod, container
),

per_container as (
    select
        cluster,
        hour,
        namespace,
        pod,
        container,
        cpu_sum / nullif(cpu_samples, 0) as cpu_cores,
        memory_sum / nullif(memory_samples, 0) as memory_working_set_bytes
    from sums
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
