{{ incremental_by(['cluster', 'day'], ['cluster', 'day']) }}
-- fct_gpu_allocation_hourly per UTC day, node and workload (namespace, workload kind, workload): the
-- usage and direct cost that fct_focus_allocation_daily splits each node-day's origin charge by.
--   gpu_hours, mig_slice_hours (MIG pods: slices requested × covered hours), vcpu_hours / gib_hours
--   (billed_unit_hours: the larger of request and use), gpu / cpu / memory / direct cost;
--   is_shared: the namespace is a shared one (shared_namespaces) in any of the day's hours.
-- Incremental: delete+insert per (cluster, day), whole days from the cluster's newest day minus the
-- lookback (as fct_workload_daily), so the FOCUS export does not re-read the month every hour.

with allocation as (
    select * from {{ ref('fct_gpu_allocation_hourly') }} as src
    {%- if is_incremental() %}
    where {{ incremental_since('src.hour', 'day', day=true) }}
    {%- endif %}
),

pod_hours as (
    select
        cast({{ dbt.date_trunc('day', 'a.hour') }} as date) as day,
        a.*,
        case when a.gpu_resource like 'nvidia.com/mig-%'
             then coalesce(s.mig_count_request, 0) * a.covered_hours end as mig_slice_hours
    from allocation as a
    left join {{ ref('int_pod_specs') }} as s
        on a.cluster = s.cluster and a.pod_uid = s.pod_uid
),

final as (
    select
        day,
        cluster,
        node,
        namespace,
        workload_kind,
        workload,
        max(team) as team,
        max(tenant) as tenant,
        max(tier) as tier,
        bool_or(is_shared_namespace) as is_shared,
        sum(gpu_hours) as gpu_hours,
        sum(mig_slice_hours) as mig_slice_hours,
        sum({{ billed_unit_hours('cpu_request', 'cpu_usage_cores', 'covered_hours') }}) as vcpu_hours,
        sum({{ billed_unit_hours('memory_request_gib', 'memory_usage_gib', 'covered_hours') }}) as gib_hours,
        sum(gpu_cost_usd) as gpu_cost_usd,
        sum(cpu_cost_usd) as cpu_cost_usd,
        sum(memory_cost_usd) as memory_cost_usd,
        sum(total_cost_usd) as direct_cost_usd
    from pod_hours
    group by 1, 2, 3, 4, 5, 6
)

select * from final
