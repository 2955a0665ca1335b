{{ config(materialized='table') }}
-- Each snapshot's covered interval [t, t + covered_s) split exactly across hour boundaries.
-- `is_first_in_hour` marks the first snapshot taken inside each hour (the capacity view's sample).
-- `snapshot_idx` numbers the cluster's snapshots in time order, and `covered_cum_s` is the running sum
-- of covered_s over the hour's rows in snapshot order: int_pods_hourly takes a run of consecutive
-- snapshots' seconds in an hour as the difference of two of these sums.
{%- set max_hours = ((var('snapshot_interval_s') * var('coverage_cap_factor')) / 3600) | round(0, 'ceil') | int + 1 %}

with timeline as (
    select * from {{ ref('int_snapshot_timeline') }}
),

offsets as (
    select generated_number - 1 as hour_offset from ({{ dbt.generate_series(max_hours) }}) as series
),

intervals as (
    select
        cluster,
        snapshot_ts,
        row_number() over (partition by cluster order by snapshot_ts) as snapshot_idx,
        {{ dbt.date_trunc('hour', 'snapshot_ts') }} as snapshot_hour,
        {{ dbt.dateadd('microsecond', 'cast(round(covered_s * 1e6) as bigint)', 'snapshot_ts') }} as covered_until
    from timeline
),

split as (
    select
        i.cluster,
        i.snapshot_ts,
        i.snapshot_idx,
        {{ dbt.dateadd('hour', 'o.hour_offset', 'i.snapshot_hour') }} as hour,
        i.covered_until,
        o.hour_offset
    from intervals as i
    cross join offsets as o
),

clipped as (
    select
        cluster,
        snapshot_ts,
        snapshot_idx,
        hour,
        {{ dbt.datediff(
            'greatest(snapshot_ts, hour)',
            'least(covered_until, ' ~ dbt.dateadd('hour', 1, 'hour') ~ ')',
            'microsecond') }} / 1e6 as covered_s,
        hour_offset = 0 as starts_in_hour
    from split
),

final as (
    select
        cluster,
        snapshot_ts,
        snapshot_idx,
        hour,
        covered_s,
        sum(covered_s) over (partition by cluster, hour order by snapshot_ts
                             rows between unbounded preceding and current row) as covered_cum_s,
        starts_in_hour
            and snapshot_ts = min(case when starts_in_hour then snapshot_ts end)
                over (partition by cluster, hour) as is_first_in_hour
    from clipped
    where covered_s > 0
)

select * from final
