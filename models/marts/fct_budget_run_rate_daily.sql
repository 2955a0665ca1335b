-- Spend, trailing run rate and month-end forecast per day and budget scope: what budgets are checked
-- against (gpufinops/views/budgets.py compares them with the budgets; models/README.md "Budgets").
-- Scopes:
--   fleet     Σ chargeback_usd of every fct_showback_daily line (= node cost + fixed overhead);
--   team      Σ chargeback_usd of the team's own namespaces (not the shared namespaces, not the
--             `(unallocated)` / `(overhead)` lines): what the team is charged back;
--   workload  Σ total_cost_usd of the workload's pods (fct_workload_daily): its direct cost, the
--             figure `budget_usd_day` of POST /v1/workloads is set against.
-- For day d (each day the warehouse has showback rows, the calendar):
--   month_to_date_usd    Σ spend over [first of d's month, d];
--   run_rate_usd_day     Σ spend over the trailing var('budget_run_rate_days') days ending d / the
--                        calendar days in that window (fewer at the start of the data), so a day the
--                        scope spent nothing counts as 0;
--   days_left            days of the month after d;
--   forecast_month_end_usd = month_to_date_usd + run_rate_usd_day × days_left.
-- A scope has a row on d when it spent something in d's month up to d or in the trailing window.
-- Every row is recomputed each build (a table: a late day changes the month to date of later days).
{%- set run_rate_days = var('budget_run_rate_days') | int %}
{%- set synthetic = ["(unallocated)", "(overhead)"] %}
{%- set excluded = (var('shared_namespaces') | list) + synthetic %}

with showback as (
    select * from {{ ref('fct_showback_daily') }}
),

workload_daily as (
    select * from {{ ref('fct_workload_daily') }}
),

fleet_spend as (
    select
        day,
        'fleet' as scope_kind,
        'fleet' as scope_id,
        cast(null as {{ dbt.type_string() }}) as team,
        cast(null as {{ dbt.type_string() }}) as workload_cluster,
        cast(null as {{ dbt.type_string() }}) as namespace,
        cast(null as {{ dbt.type_string() }}) as workload_kind,
        cast(null as {{ dbt.type_string() }}) as workload,
        sum(chargeback_usd) as spend_usd
    from showback
    group by day
),

team_spend as (
    select
        day,
        'team' as scope_kind,
        concat('team:', team) as scope_id,
        team,
        cast(null as {{ dbt.type_string() }}) as workload_cluster,
        cast(null as {{ dbt.type_string() }}) as namespace,
        cast(null as {{ dbt.type_string() }}) as workload_kind,
        cast(null as {{ dbt.type_string() }}) as workload,
        sum(chargeback_usd) as spend_usd
    from showback
    where namespace not in ({% for ns in excluded %}'{{ ns }}'{{ ", " if not loop.last }}{% endfor %})
    group by day, team
),

workload_spend as (
    select
        day,
        'workload' as scope_kind,
        concat('workload:', cluster, '/', namespace, '/', coalesce(workload_kind, ''), '/', workload) as scope_id,
        max(team) as team,
        cluster as workload_cluster,
        namespace,
        workload_kind,
        workload,
        sum(total_cost_usd) as spend_usd
    from workload_daily
    group by day, cluster, namespace, workload_kind, workload
),

spend as (
    select * from fleet_spend
    union all
    select * from team_spend
    union all
    select * from workload_spend
),

calendar as (
    select distinct
        cast(day as date) as day,
        cast({{ dbt.date_trunc('month', 'day') }} as date) as month_start,
        cast({{ dbt.last_day('day', 'month') }} as date) as month_end
    from showback
),

calendar_days as (
    -- the calendar days in each day's trailing run-rate window, from the first day of the data
    select
        c.day,
        c.month_start,
        c.month_end,
        least({{ run_rate_days }}, {{ dbt.datediff('f.first_day', 'c.day', 'day') }} + 1) as run_rate_days
    from calendar as c
    cross join (select min(day) as first_day from calendar) as f
),

windows as (
    select
        c.day,
        c.month_start,
        c.month_end,
        c.run_rate_days,
        s.scope_kind,
        s.scope_id,
        s.team,
        s.workload_cluster,
        s.namespace,
        s.workload_kind,
        s.workload,
        s.day as spend_day,
        s.spend_usd
    from calendar_days as c
    inner join spend as s
        on s.day <= c.day
        and (s.day >= c.month_start or s.day > {{ dbt.dateadd('day', -run_rate_days, 'c.day') }})
),

aggregated as (
    select
        day,
        month_start,
        month_end,
        run_rate_days,
        scope_kind,
        scope_id,
        max(team) as team,
        max(workload_cluster) as workload_cluster,
        max(namespace) as namespace,
        max(workload_kind) as workload_kind,
        max(workload) as workload,
        sum(case when spend_day = day then spend_usd else 0 end) as spend_usd,
        sum(case when spend_day >= month_start then spend_usd else 0 end) as month_to_date_usd,
        sum(case when spend_day > {{ dbt.dateadd('day', -run_rate_days, 'day') }} then spend_usd else 0 end)
            as trailing_spend_usd
    from windows
    group by day, month_start, month_end, run_rate_days, scope_kind, scope_id
),

final as (
    select
        day,
        scope_kind,
        scope_id,
        team,
        workload_cluster,
        namespace,
        workload_kind,
        workload,
        spend_usd,
        month_to_date_usd,
        run_rate_days,
        trailing_spend_usd / run_rate_days as run_rate_usd_day,
        {{ dbt.datediff('day', 'month_end', 'day') }} as days_left,
        {{ dbt.datediff('month_start', 'month_end', 'day') }} + 1 as days_in_month,
        month_to_date_usd + trailing_spend_usd / run_rate_days * {{ dbt.datediff('day', 'month_end', 'day') }}
            as forecast_month_end_usd
    from aggregated
)

select * from final
