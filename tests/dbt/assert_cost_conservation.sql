-- DESIGN §3 conservation: for every (cluster, hour)
--   Σ pod total cost + Σ unallocated cost − Σ overcommit = Σ node cost
-- to conservation_rel_tol relative (conservation_abs_tol absolute for ~0 hours). Returns violations.
-- An incremental build checks the hours it rebuilt (macros/test_window.sql).
with pods as (
    select cluster, hour, sum(total_cost_usd) as pod_cost_usd
    from {{ windowed(ref('fct_gpu_allocation_hourly')) }} as a
    group by cluster, hour
),

nodes as (
    select
        cluster,
        hour,
        sum(node_cost_usd) as node_cost_usd,
        sum(unallocated_cost_usd) as unallocated_cost_usd,
        sum(overcommit_cost_usd) as overcommit_cost_usd
    from {{ windowed(ref('fct_node_hourly')) }} as n
    group by cluster, hour
),

compared as (
    select
        coalesce(n.cluster, p.cluster) as cluster,
        coalesce(n.hour, p.hour) as hour,
        coalesce(p.pod_cost_usd, 0) as pod_cost_usd,
        coalesce(n.unallocated_cost_usd, 0) as unallocated_cost_usd,
        coalesce(n.overcommit_cost_usd, 0) as overcommit_cost_usd,
        coalesce(n.node_cost_usd, 0) as node_cost_usd
    from nodes as n
    full outer join pods as p
        on n.cluster = p.cluster and n.hour = p.hour
)

select
    *,
    pod_cost_usd + unallocated_cost_usd - overcommit_cost_usd - node_cost_usd as imbalance_usd
from compared
where abs(pod_cost_usd + unallocated_cost_usd - overcommit_cost_usd - node_cost_usd)
      > greatest({{ var('conservation_rel_tol') }} * abs(node_cost_usd), {{ var('conservation_abs_tol') }})
