{{ incremental_by(['cluster', 'snapshot_ts']) }}
-- depends_on: {{ ref('stg_k8s__node_snapshots') }}
-- depends_on: {{ ref('stg_k8s__pod_snapshots') }}
-- Per cluster, the distinct snapshot times of nodes and pods form the timeline (read from the lake's
-- per-file lists of them, macros/rollups.sql, the snapshot times, not from every snapshot row). A snapshot at t_k
-- covers [t_k, t_{k+1}) capped at coverage_cap_factor × snapshot_interval_s; the newest covers one
-- interval. The uncovered rest of a longer gap is reported (int_coverage_gaps), never extrapolated.
-- Incremental: delete+insert per (cluster, snapshot_ts) from the cluster's newest snapshot minus the
-- lookback (the newest snapshot's coverage grows once the next one lands), reading only the new
-- day= partitions (landing_input); a snapshot's row depends only on the snapshots after it.
{%- set interval_s = var('snapshot_interval_s') %}
{%- set cap_s = var('snapshot_interval_s') * var('coverage_cap_factor') %}

with node_snapshots as (
    select distinct src.cluster, src.snapshot_ts from {{ landing_input('stg_k8s__node_snapshots', 'k8s_node_snapshots', 'snapshot_ts') }} as src
    {%- if is_incremental() %}
    where {{ incremental_since('src.snapshot_ts', 'snapshot_ts') }}
    {%- endif %}
),

pod_snapshots as (
    select distinct src.cluster, src.snapshot_ts from {{ landing_input('stg_k8s__pod_snapshots', 'k8s_pod_snapshots', 'snapshot_ts') }} as src
    {%- if is_incremental() %}
    where {{ incremental_since('src.snapshot_ts', 'snapshot_ts') }}
    {%- endif %}
),

snapshots as (
    select cluster, snapshot_ts from node_snapshots
    union
    select cluster, snapshot_ts from pod_snapshots
),

ordered as (
    select
        cluster,
        snapshot_ts,
        lead(snapshot_ts) over (partition by cluster order by snapshot_ts) as next_snapshot_ts
    from snapshots
),

final as (
    select
        cluster,
        snapshot_ts,
        next_snapshot_ts,
        case
            when next_snapshot_ts is null then {{ interval_s }}
            else least({{ dbt.datediff('snapshot_ts', 'next_snapshot_ts', 'microsecond') }} / 1e6, {{ cap_s }})
        end as covered_s,
        case
            when next_snapshot_ts is not null
                 and {{ dbt.datediff('snapshot_ts', 'next_snapshot_ts', 'microsecond') }} / 1e6 > {{ cap_s }}
            then {{ dbt.datediff('snapshot_ts', 'next_snapshot_ts', 'microsecond') }} / 1e6 - {{ cap_s }}
            else 0
        end as gap_s
    from ordered
)

select * from final
