{{ incremental_by(['cluster', 'day']) }}
-- fct_gpu_allocation_hourly per UTC day and workload (cluster, namespace, workload kind, workload): its
-- first and last pod-hour of the day, GPU-hours and total cost. dim_workload's span and totals are the
-- min / max / sums of these rows, so the hourly build no longer re-reads the month of pod-hours for them
-- (at 1,000 nodes: 4.6 M rows, ~1 s every hour, growing with the history).
-- Incremental: delete+insert per (cluster, day), whole days from the cluster's newest day minus the
-- lookback (as fct_workload_daily). On Spark a table (a Hive Parquet partitioned table takes no
-- timestamp_ntz column; docs/spark.md).

with allocation as (
    select * from {{ ref('fct_gpu_allocation_hourly') }} as src
    {%- if is_incremental() %}
    where {{ incremental_since('src.hour', 'day', day=true) }}
    {%- endif %}
),

final as (
    select
        cast({{ dbt.date_trunc('day', 'hour') }} as date) as day,
        cluster,
        namespace,
        workload_kind,
        workload,
        min(hour) as first_hour,
        max(hour) as last_hour,
        sum(gpu_hours) as gpu_hours,
        sum(total_cost_usd) as total_cost_usd
    from allocation
    group by 1, 2, 3, 4, 5
)

select * from final
