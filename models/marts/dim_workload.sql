-- One row per workload (cluster, namespace, workload_kind, workload): its team, tenant, tier and
-- totals; the recommender's unit.
with pods as (
    select * from {{ ref('int_pod_attributes') }}
),

allocation as (
    -- the span and totals of its pod-hours, off the per-day rows (int_workload_span_daily)
    select
        cluster, namespace, workload_kind, workload,
        min(first_hour) as first_hour,
        max(last_hour) as last_hour,
        sum(gpu_hours) as gpu_hours,
        sum(total_cost_usd) as total_cost_usd
    from {{ ref('int_workload_span_daily') }}
    group by 1, 2, 3, 4
),

workloads as (
    select
        cluster,
        namespace,
        workload_kind,
        workload,
        {{ mode_of('team') }} as team,
        {{ mode_of('tenant') }} as tenant,
        {{ mode_of('tier') }} as tier,
        bool_or(checkpointed) as checkpointed,
        count(*) as pods
    from pods
    group by cluster, namespace, workload_kind, workload
),

final as (
    select
        w.*,
        a.first_hour,
        a.last_hour,
        coalesce(a.gpu_hours, 0) as gpu_hours,
        coalesce(a.total_cost_usd, 0) as total_cost_usd
    from workloads as w
    left join allocation as a
        on w.cluster = a.cluster and w.namespace = a.namespace
        and w.workload_kind = a.workload_kind and w.workload = a.workload
)

select * from final
