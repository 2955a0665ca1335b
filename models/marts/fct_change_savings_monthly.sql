-- Savings realized per change and calendar month: the change's realized daily saving
-- (fct_change_outcomes, measured changes only) times the complete days of its cluster in that month
-- on which the change was in effect (after its rollout, before it ended). The Finance page's
-- "savings realized this month" and the monthly report sum this.

with outcomes as (
    select * from {{ ref('fct_change_outcomes') }}
    where outcome_status = 'measured'
),

cluster_days as (
    {{ complete_cluster_days() }}
),

in_effect as (
    select
        o.change_id, o.cluster, o.kind, o.namespace, o.target_kind, o.target_name, o.team,
        cast({{ dbt.date_trunc('month', 'd.day') }} as date) as month,
        d.day,
        o.realized_daily_savings_usd
    from outcomes as o
    inner join cluster_days as d
        on d.cluster = o.cluster and d.day > o.rollout_end_day
        and (o.ended_at is null or d.day < cast({{ dbt.date_trunc('day', 'o.ended_at') }} as date))
),

final as (
    select
        month, change_id, cluster, kind, namespace, target_kind, target_name, team,
        count(*) as days_in_effect,
        sum(realized_daily_savings_usd) as realized_savings_usd
    from in_effect
    group by 1, 2, 3, 4, 5, 6, 7, 8
)

select * from final
