{{ incremental_by(['cluster', 'day'], ['cluster', 'day']) }}
-- fct_gpu_allocation_hourly rolled up per UTC day and workload (one row per day, cluster, namespace,
-- workload, team, tenant, tier, GPU model and GPU resource). The team page and reports read 30 days of
-- per-workload totals from here instead of ~30 × 24 hourly rows per pod, and the finance page's cost lines
-- (GPU and CPU/memory outside the shared namespaces) per day. Every measure is a plain sum
-- of the hourly mart (tested: tests/dbt/assert_workload_daily_sums_to_hourly.sql).
-- Incremental: delete+insert per (cluster, day), re-reading the whole days from the cluster's newest day
-- minus the lookback, so every day whose hours the hourly mart rebuilt is rebuilt in full.

with allocation as (
    select * from {{ ref('fct_gpu_allocation_hourly') }} as src
    {%- if is_incremental() %}
    where {{ incremental_since('src.hour', 'day', day=true) }}
    {%- endif %}
),

daily as (
    select
        cast({{ dbt.date_trunc('day', 'hour') }} as date) as day,
        cluster,
        tenant,
        team,
        namespace,
        workload_kind,
        workload,
        tier,
        gpu_model,
        gpu_resource,
        sum(gpu_hours) as gpu_hours,
        sum(utilized_gpu_hours) as utilized_gpu_hours,
        sum(idle_gpu_hours) as idle_gpu_hours,
        sum(measured_gpu_hours) as measured_gpu_hours,
        sum(unmeasured_gpu_hours) as unmeasured_gpu_hours,
        sum(gpu_cost_usd) as gpu_cost_usd,
        sum(idle_cost_usd) as idle_cost_usd,
        sum(cpu_cost_usd) as cpu_cost_usd,
        sum(memory_cost_usd) as memory_cost_usd,
        sum(total_cost_usd) as total_cost_usd,
        -- a property of (cluster, namespace) in one build: the same in every hour of the group
        bool_or(is_shared_namespace) as is_shared_namespace
    from allocation
    group by 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
),

final as (
    select * from daily
)

select * from final
