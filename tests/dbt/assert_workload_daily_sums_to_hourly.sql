-- fct_workload_daily is a roll-up of fct_gpu_allocation_hourly: per (cluster, day) every measure sums
-- to the hourly mart's, to 1e-9 relative (1e-9 absolute near 0), and no day is missing on either side
-- (an incremental run that skipped a rebuilt hour would show here). Returns violations.
-- An incremental build checks the days it rebuilt (macros/test_window.sql).
{%- set measures = ['gpu_hours', 'utilized_gpu_hours', 'idle_gpu_hours', 'measured_gpu_hours',
                    'unmeasured_gpu_hours', 'gpu_cost_usd', 'idle_cost_usd', 'cpu_cost_usd',
                    'memory_cost_usd', 'total_cost_usd'] %}

with hourly as (
    select
        cluster,
        cast({{ dbt.date_trunc('day', 'hour') }} as date) as day,
        {%- for m in measures %}
        sum({{ m }}) as {{ m }},
        {%- endfor %}
        count(*) as pod_hours
    from {{ windowed(ref('fct_gpu_allocation_hourly'), 'day') }} as a
    group by 1, 2
),

daily as (
    select
        cluster,
        day,
        {%- for m in measures %}
        sum({{ m }}) as {{ m }},
        {%- endfor %}
        count(*) as workload_rows
    from {{ windowed(ref('fct_workload_daily')) }} as w
    group by 1, 2
),

compared as (
    select
        coalesce(h.cluster, d.cluster) as cluster,
        coalesce(h.day, d.day) as day,
        h.pod_hours,
        d.workload_rows,
        {%- for m in measures %}
        coalesce(h.{{ m }}, 0) as hourly_{{ m }},
        coalesce(d.{{ m }}, 0) as daily_{{ m }}{{ "," if not loop.last }}
        {%- endfor %}
    from hourly as h
    full outer join daily as d
        on h.cluster = d.cluster and h.day = d.day
)

select *
from compared
where pod_hours is null
   or workload_rows is null
   {%- for m in measures %}
   or abs(hourly_{{ m }} - daily_{{ m }}) > greatest(1e-9 * abs(hourly_{{ m }}), 1e-9)
   {%- endfor %}
