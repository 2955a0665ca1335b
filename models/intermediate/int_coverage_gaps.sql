{{ config(materialized='table') }}
-- Stretches of a cluster's timeline no snapshot covers (the next snapshot came later than the cap).
with timeline as (
    select * from {{ ref('int_snapshot_timeline') }}
),

final as (
    select
        cluster,
        {{ dbt.dateadd('second', 'covered_s', 'snapshot_ts') }} as gap_start,
        next_snapshot_ts as gap_end,
        gap_s as gap_seconds,
        snapshot_ts as last_snapshot_ts
    from timeline
    where gap_s > 0
)

select * from final
