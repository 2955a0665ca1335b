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
-- Incremental (DuckDB): the days from the first day whose spend lines changed since the live version's
-- build (a late day changes the month to date of every later day), delete+insert per day; the lines of
-- each build are recorded in _budget_spend_lines (macros/budgets.sql). Spark rebuilds it whole.
{{ incremental_by(['day']) }}
{{ config(post_hook="{{ record_budget_lines(ref('fct_showback_daily'), ref('fct_workload_daily')) }}") }}
{%- set run_rate_days = var('budget_run_rate_days') | int %}
{%- set record = budget_lines_record() if is_incremental() else none %}

with showback as (
    select * from {{ ref('fct_showback_daily') }}
),

spend as (
    {{ budget_spend_lines('showback', ref('fct_workload_daily')) }}
),

calendar as (
    select distinct
        cast(day as date) as day,
        cast({{ dbt.date_trunc('month', 'day') }} as date) as month_start,
        cast({{ dbt.last_day('day', 'month') }} as date) as month_end
    from showback
),

{%- if is_incremental() %}

first_changed as (
    -- the first day whose spend lines differ from the ones the live version was built from (table
    -- _budget_spend_lines, macro record_budget_lines): a row of day d reads only lines of days <= d, so the
    -- rows before that day are as a full build makes them. A line's spend is the same to 1e-12 relative
    -- (a sum's last bits may change with the order of its rows). No record: every day.
    {%- if record is not none %}
    select min(coalesce(n.day, o.day)) as day
    from spend as n
    full outer join {{ record }} as o
        on n.day = o.day and n.scope_kind = o.scope_kind and n.scope_id = o.scope_id
        {%- for c in ['team', 'workload_cluster', 'namespace', 'workload_kind', 'workload'] %}
        and n.{{ c }} is not distinct from o.{{ c }}
        {%- endfor %}
    where n.day is null or o.day is null
       or not coalesce(abs(n.spend_usd - o.spend_usd) <= 1e-12 * greatest(abs(n.spend_usd), abs(o.spend_usd)),
                       n.spend_usd is null and o.spend_usd is null)
    {%- else %}
    select min(day) as day from calendar
    {%- endif %}
),
{%- endif %}

calendar_days as (
    -- the calendar days in each day's trailing run-rate window, from the first day of the data
    select
        c.day,
        c.month_start,
        c.month_end,
        least({{ run_rate_days }}, {{ dbt.datediff('f.first_day', 'c.day', 'day') }} + 1) as run_rate_days
    from calendar as c
    cross join (select min(day) as first_day from calendar) as f
    {%- if is_incremental() %}
    cross join first_changed as fc
    where c.day >= fc.day
    {%- endif %}
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
