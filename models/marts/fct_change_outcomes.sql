-- The loop closed: for every applied change (stg_changes__applied), its target's cost, GPU-hours,
-- idle % and (serving) requests over equal windows of complete days before and after the rollout,
-- the days of the rollout excluded, and the realized monthly saving against the estimate.
-- Definitions: models/README.md "Change outcomes".
--   rollout days   = the UTC day of applied_at .. the day of verified_at (applied_at when unverified)
--   a day          = a complete UTC day of the change's cluster (fct_node_hourly has all 24 hours)
--   after days     = days after the rollout, before the day the change ended (rolled back / failed)
--   window_days    = least(var change_outcome_window_days, before days, after days): the last
--                    window_days days before the rollout and the first window_days days after it
--   target         = a workload change: fct_workload_daily of (cluster, namespace, workload = target);
--                    a NodePool / Node change: fct_node_hourly of the pool's nodes / the node

with changes as (
    select * from {{ ref('stg_changes__applied') }}
),

cluster_days as (
    {{ complete_cluster_days() }}
),

bounds as (
    select
        c.*,
        cast({{ dbt.date_trunc('day', 'c.applied_at') }} as date) as rollout_start_day,
        cast({{ dbt.date_trunc('day', 'coalesce(c.verified_at, c.applied_at)') }} as date) as rollout_end_day,
        cast({{ dbt.date_trunc('day', 'c.ended_at') }} as date) as ended_day
    from changes as c
),

candidate_days as (
    select
        b.change_id,
        d.day,
        case when d.day < b.rollout_start_day then 'before' else 'after' end as side,
        case when d.day < b.rollout_start_day
             then {{ dbt.datediff('d.day', 'b.rollout_start_day', 'day') }}
             else {{ dbt.datediff('b.rollout_end_day', 'd.day', 'day') }}
        end as distance
    from bounds as b
    inner join cluster_days as d on d.cluster = b.cluster
    where d.day < b.rollout_start_day
       or (d.day > b.rollout_end_day and (b.ended_day is null or d.day < b.ended_day))
),

day_counts as (
    select
        b.change_id,
        coalesce(sum(case when cd.side = 'before' then 1 else 0 end), 0) as before_days_available,
        coalesce(sum(case when cd.side = 'after' then 1 else 0 end), 0) as after_days_available
    from bounds as b
    left join candidate_days as cd on cd.change_id = b.change_id
    group by 1
),

sized as (
    select
        change_id,
        before_days_available,
        after_days_available,
        least({{ var('change_outcome_window_days') }}, before_days_available, after_days_available) as window_days
    from day_counts
),

window_days as (
    select r.change_id, r.day, r.side
    from (
        select cd.*, row_number() over (partition by cd.change_id, cd.side order by cd.distance) as day_rank
        from candidate_days as cd
    ) as r
    inner join sized as s on s.change_id = r.change_id
    where r.day_rank <= s.window_days
),

workload_days as (
    select
        cluster, namespace, workload, day,
        sum(total_cost_usd) as cost_usd,
        sum(gpu_hours) as gpu_hours,
        sum(idle_gpu_hours) as idle_gpu_hours,
        sum(measured_gpu_hours) as measured_gpu_hours
    from {{ ref('fct_workload_daily') }}
    group by 1, 2, 3, 4
),

node_days as (
    select
        cluster, node, node_pool, cast({{ dbt.date_trunc('day', 'hour') }} as date) as day,
        sum(node_cost_usd) as cost_usd,
        sum(coalesce(gpu_capacity, 0) * covered_hours) as gpu_hours,
        sum(greatest(measured_gpu_hours - utilized_gpu_hours, 0)) as idle_gpu_hours,
        sum(measured_gpu_hours) as measured_gpu_hours
    from {{ ref('fct_node_hourly') }}
    group by 1, 2, 3, 4
),

serving_days as (
    select cluster, namespace, workload, cast({{ dbt.date_trunc('day', 'hour') }} as date) as day,
           sum(requests) as requests
    from {{ ref('fct_serving_requests_hourly') }}
    where matched
    group by 1, 2, 3, 4
),

target_days as (
    -- every window day of every change with its target's measures (0 where the target had none)
    select
        w.change_id,
        w.side,
        w.day,
        coalesce(sum(coalesce(wd.cost_usd, 0) + coalesce(nd.cost_usd, 0)), 0) as cost_usd,
        coalesce(sum(coalesce(wd.gpu_hours, 0) + coalesce(nd.gpu_hours, 0)), 0) as gpu_hours,
        coalesce(sum(coalesce(wd.idle_gpu_hours, 0) + coalesce(nd.idle_gpu_hours, 0)), 0) as idle_gpu_hours,
        coalesce(sum(coalesce(wd.measured_gpu_hours, 0) + coalesce(nd.measured_gpu_hours, 0)), 0) as measured_gpu_hours
    from window_days as w
    inner join bounds as b on b.change_id = w.change_id
    left join workload_days as wd
        on b.namespace is not null and wd.cluster = b.cluster and wd.namespace = b.namespace
        and wd.workload = b.target_name and wd.day = w.day
    left join node_days as nd
        on b.namespace is null and nd.cluster = b.cluster and nd.day = w.day
        and ((b.target_kind = 'NodePool' and nd.node_pool = b.target_name)
             or (b.target_kind = 'Node' and nd.node = b.target_name))
    group by 1, 2, 3
),

request_days as (
    select w.change_id, w.side, w.day, s.requests
    from window_days as w
    inner join bounds as b on b.change_id = w.change_id
    inner join serving_days as s
        on b.namespace is not null and s.cluster = b.cluster and s.namespace = b.namespace
        and s.workload = b.target_name and s.day = w.day
),

sides as (
    select
        change_id,
        min(case when side = 'before' then day end) as before_start_day,
        max(case when side = 'before' then day end) as before_end_day,
        min(case when side = 'after' then day end) as after_start_day,
        max(case when side = 'after' then day end) as after_end_day,
        sum(case when side = 'before' then cost_usd else 0 end) as cost_before_usd,
        sum(case when side = 'after' then cost_usd else 0 end) as cost_after_usd,
        sum(case when side = 'before' then gpu_hours else 0 end) as gpu_hours_before,
        sum(case when side = 'after' then gpu_hours else 0 end) as gpu_hours_after,
        sum(case when side = 'before' then idle_gpu_hours else 0 end) as idle_gpu_hours_before,
        sum(case when side = 'after' then idle_gpu_hours else 0 end) as idle_gpu_hours_after,
        sum(case when side = 'before' then measured_gpu_hours else 0 end) as measured_gpu_hours_before,
        sum(case when side = 'after' then measured_gpu_hours else 0 end) as measured_gpu_hours_after
    from target_days
    group by 1
),

requests as (
    select
        change_id,
        sum(case when side = 'before' then requests else 0 end) as requests_before,
        sum(case when side = 'after' then requests else 0 end) as requests_after
    from request_days
    group by 1
),

measured as (
    select
        b.change_id,
        b.cluster,
        b.kind,
        b.namespace,
        b.target_kind,
        b.target_name,
        b.team,
        b.recommendation_id,
        b.status,
        b.applied_at,
        b.verified_at,
        b.ended_at,
        b.rollout_start_day,
        b.rollout_end_day,
        s.before_days_available,
        s.after_days_available,
        s.window_days,
        d.before_start_day,
        d.before_end_day,
        d.after_start_day,
        d.after_end_day,
        case when s.window_days > 0 then d.cost_before_usd end as cost_before_usd,
        case when s.window_days > 0 then d.cost_after_usd end as cost_after_usd,
        case when s.window_days > 0 then d.gpu_hours_before end as gpu_hours_before,
        case when s.window_days > 0 then d.gpu_hours_after end as gpu_hours_after,
        {{ idle_pct('d.idle_gpu_hours_before', 'd.measured_gpu_hours_before') }} as idle_pct_before,
        {{ idle_pct('d.idle_gpu_hours_after', 'd.measured_gpu_hours_after') }} as idle_pct_after,
        case when s.window_days > 0 then r.requests_before end as requests_before,
        case when s.window_days > 0 then r.requests_after end as requests_after,
        b.est_monthly_savings_usd,
        case when s.window_days > 0
             then (d.cost_before_usd - d.cost_after_usd) / (s.window_days * 24.0) * {{ var('hours_per_month') }}
        end as realized_monthly_savings_usd,
        case when s.window_days > 0
             then (d.cost_before_usd - d.cost_after_usd) / s.window_days
        end as realized_daily_savings_usd
    from bounds as b
    inner join sized as s on s.change_id = b.change_id
    left join sides as d on d.change_id = b.change_id
    left join requests as r on r.change_id = b.change_id
),

final as (
    -- cost_regressed: up by more than rounding (1e-9 relative + 1e-9 USD)
    select
        m.*,
        case when m.est_monthly_savings_usd > 0
             then m.realized_monthly_savings_usd / m.est_monthly_savings_usd
        end as realized_to_estimated,
        coalesce(m.cost_after_usd > m.cost_before_usd * (1 + 1e-9) + 1e-9, false) as cost_regressed,
        coalesce(m.requests_before > 0
                 and m.requests_after < m.requests_before * (1 - {{ var('change_outcome_requests_drop_pct') }}),
                 false) as requests_regressed,
        coalesce(m.cost_after_usd > m.cost_before_usd * (1 + 1e-9) + 1e-9, false)
            or coalesce(m.requests_before > 0
                        and m.requests_after < m.requests_before * (1 - {{ var('change_outcome_requests_drop_pct') }}),
                        false) as regression,
        case
            when m.window_days > 0 then 'measured'
            when m.before_days_available = 0 then 'no_baseline'
            when m.ended_at is not null then 'ended_before_measured'
            else 'awaiting_data'
        end as outcome_status
    from measured as m
)

select * from final
