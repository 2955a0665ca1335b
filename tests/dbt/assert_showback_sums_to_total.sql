-- Σ chargeback over all showback rows = Σ node cost + fixed overhead, per (day, cluster), and the
-- redistribution columns (shared_cost_usd, unallocated_share_usd) each sum to 0. Returns violations.
-- An incremental build checks the days it rebuilt (macros/test_window.sql).
with showback as (
    select
        day,
        cluster,
        sum(chargeback_usd) as chargeback_usd,
        sum(shared_cost_usd) as shared_cost_usd,
        sum(unallocated_share_usd) as unallocated_share_usd
    from {{ windowed(ref('fct_showback_daily')) }} as s
    group by day, cluster
),

nodes as (
    select cast({{ dbt.date_trunc('day', 'hour') }} as date) as day, cluster, sum(node_cost_usd) as node_cost_usd
    from {{ windowed(ref('fct_node_hourly'), 'day') }} as n
    group by 1, 2
),

overhead as (
    select
        cast({{ dbt.date_trunc('day', 'hour') }} as date) as day,
        cluster,
        sum(covered_s) / 3600.0 * {{ fixed_overhead_rate('cluster') }} as overhead_usd
    from {{ windowed(ref('int_snapshot_hours'), 'day') }} as h
    group by 1, 2
),

compared as (
    select
        coalesce(s.day, n.day, o.day) as day,
        coalesce(s.cluster, n.cluster, o.cluster) as cluster,
        coalesce(s.chargeback_usd, 0) as chargeback_usd,
        coalesce(n.node_cost_usd, 0) + coalesce(o.overhead_usd, 0) as expected_usd,
        coalesce(s.shared_cost_usd, 0) as shared_cost_usd,
        coalesce(s.unallocated_share_usd, 0) as unallocated_share_usd
    from showback as s
    full outer join nodes as n on s.day = n.day and s.cluster = n.cluster
    full outer join overhead as o on coalesce(s.day, n.day) = o.day and coalesce(s.cluster, n.cluster) = o.cluster
)

select *
from compared
where abs(chargeback_usd - expected_usd) > greatest(1e-6 * abs(expected_usd), 1e-6)
   or abs(shared_cost_usd) > greatest(1e-6 * abs(expected_usd), 1e-6)
   or abs(unallocated_share_usd) > greatest(1e-6 * abs(expected_usd), 1e-6)
