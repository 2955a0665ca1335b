{{ incremental_by(['cluster', 'day'], ['cluster', 'day']) }}
-- Showback and chargeback per (day, cluster, namespace, team, tenant).
--   direct_cost_usd       Σ pod cost of the row.
--   shared_cost_usd       a recipient's share of the day's shared pool = Σ direct cost of the shared
--                         namespaces + the fixed overhead ($/h × the cluster's covered hours).
--                         The shared namespaces and the `(overhead)` line carry the negative of what
--                         was handed out, so the column sums to 0.
--   unallocated_share_usd the same for the net unallocated cost (Σ unallocated − Σ overcommit) when
--                         distribute_unallocated is on; the `(unallocated)` line carries the rest.
--   chargeback_usd        direct + shared + unallocated share; Σ over all rows = Σ node cost +
--                         fixed overhead (tested).
-- shared_cost_method: proportional (to GPU cost; to total direct cost on a day with no GPU cost),
-- even (equal per recipient row), separate (nothing distributed; the lines keep their cost).
-- Every row depends only on its (cluster, day). Incremental: delete+insert per (cluster, day), whole days
-- from the cluster's newest day minus the lookback (as fct_workload_daily).
{%- set method = var('shared_cost_method') %}
{%- if method not in ['proportional', 'even', 'separate'] %}
  {{ exceptions.raise_compiler_error("var shared_cost_method must be proportional, even or separate, not '" ~ method ~ "'") }}
{%- endif %}

{%- set since_day -%}
    {%- if is_incremental() %} where {{ incremental_since('src.hour', 'day', day=true) }}{%- endif %}
{%- endset %}

with allocation as (
    select * from {{ ref('fct_gpu_allocation_hourly') }} as src {{ since_day }}
),

nodes as (
    select * from {{ ref('fct_node_hourly') }} as src {{ since_day }}
),

snapshot_hours as (
    select * from {{ ref('int_snapshot_hours') }} as src {{ since_day }}
),

pods_daily as (
    select
        {{ dbt.date_trunc('day', 'hour') }} as day,
        cluster,
        namespace,
        team,
        tenant,
        bool_or(is_shared_namespace) as is_shared,
        sum(gpu_hours) as gpu_hours,
        sum(utilized_gpu_hours) as utilized_gpu_hours,
        sum(idle_gpu_hours) as idle_gpu_hours,
        sum(measured_gpu_hours) as measured_gpu_hours,
        sum(total_cost_usd) as direct_cost_usd,
        sum(gpu_cost_usd) as gpu_cost_usd,
        sum(idle_cost_usd) as idle_cost_usd
    from allocation
    group by 1, 2, 3, 4, 5
),

unallocated_daily as (
    select
        {{ dbt.date_trunc('day', 'hour') }} as day,
        cluster,
        sum(unallocated_gpu_hours) as unallocated_gpu_hours,
        sum(unallocated_cost_usd) - sum(overcommit_cost_usd) as net_unallocated_usd
    from nodes
    group by 1, 2
),

overhead_daily as (
    select
        {{ dbt.date_trunc('day', 'hour') }} as day,
        cluster,
        sum(covered_s) / 3600.0 * {{ fixed_overhead_rate('cluster') }} as overhead_usd
    from snapshot_hours
    group by 1, 2
),

cluster_days as (
    select day, cluster from pods_daily
    union
    select day, cluster from unallocated_daily
    union
    select day, cluster from overhead_daily
),

pools as (
    select
        d.day,
        d.cluster,
        coalesce(s.shared_direct_usd, 0) + coalesce(o.overhead_usd, 0) as shared_pool_usd,
        coalesce(o.overhead_usd, 0) as overhead_usd,
        coalesce(u.net_unallocated_usd, 0) as net_unallocated_usd,
        coalesce(u.unallocated_gpu_hours, 0) as unallocated_gpu_hours,
        coalesce(r.recipients, 0) as recipients,
        coalesce(r.recipient_gpu_cost_usd, 0) as recipient_gpu_cost_usd,
        coalesce(r.recipient_direct_cost_usd, 0) as recipient_direct_cost_usd
    from cluster_days as d
    left join (
        select day, cluster, sum(direct_cost_usd) as shared_direct_usd
        from pods_daily where is_shared group by 1, 2
    ) as s on d.day = s.day and d.cluster = s.cluster
    left join (
        select day, cluster, count(*) as recipients, sum(gpu_cost_usd) as recipient_gpu_cost_usd,
               sum(direct_cost_usd) as recipient_direct_cost_usd
        from pods_daily where not is_shared group by 1, 2
    ) as r on d.day = r.day and d.cluster = r.cluster
    left join overhead_daily as o on d.day = o.day and d.cluster = o.cluster
    left join unallocated_daily as u on d.day = u.day and d.cluster = u.cluster
),

distribution as (
    -- share_basis: which weight applies this day; null = nothing can be distributed
    select
        *,
        {{ shared_cost_basis('recipients', 'recipient_gpu_cost_usd', 'recipient_direct_cost_usd') }} as share_basis
    from pools
),

recipient_rows as (
    select
        p.day, p.cluster, p.namespace, p.team, p.tenant,
        p.gpu_hours, p.utilized_gpu_hours, p.idle_gpu_hours, p.measured_gpu_hours,
        p.direct_cost_usd, p.idle_cost_usd,
        {{ shared_cost_weight('d.share_basis', 'd.recipients', 'p.gpu_cost_usd', 'd.recipient_gpu_cost_usd', 'p.direct_cost_usd', 'd.recipient_direct_cost_usd') }} as weight,
        d.shared_pool_usd,
        d.net_unallocated_usd
    from pods_daily as p
    inner join distribution as d on p.day = d.day and p.cluster = d.cluster
    where not p.is_shared
),

recipient_lines as (
    select
        day, cluster, tenant, team, namespace,
        gpu_hours, utilized_gpu_hours, idle_gpu_hours, measured_gpu_hours,
        direct_cost_usd, idle_cost_usd,
        weight * shared_pool_usd as shared_cost_usd,
        {%- if var('distribute_unallocated') %}
        weight * net_unallocated_usd as unallocated_share_usd
        {%- else %}
        cast(0 as double) as unallocated_share_usd
        {%- endif %}
    from recipient_rows
),

shared_namespace_lines as (
    select
        p.day, p.cluster, p.tenant, p.team, p.namespace,
        p.gpu_hours, p.utilized_gpu_hours, p.idle_gpu_hours, p.measured_gpu_hours,
        p.direct_cost_usd, p.idle_cost_usd,
        case when d.share_basis is null then cast(0 as double) else -p.direct_cost_usd end as shared_cost_usd,
        cast(0 as double) as unallocated_share_usd
    from pods_daily as p
    inner join distribution as d on p.day = d.day and p.cluster = d.cluster
    where p.is_shared
),

overhead_lines as (
    select
        day, cluster, 'unassigned' as tenant, 'unassigned' as team, '(overhead)' as namespace,
        cast(0 as double) as gpu_hours, cast(0 as double) as utilized_gpu_hours, cast(0 as double) as idle_gpu_hours, cast(0 as double) as measured_gpu_hours,
        overhead_usd as direct_cost_usd, cast(0 as double) as idle_cost_usd,
        case when share_basis is null then cast(0 as double) else -overhead_usd end as shared_cost_usd,
        cast(0 as double) as unallocated_share_usd
    from distribution
),

unallocated_lines as (
    select
        day, cluster, 'unassigned' as tenant, 'unassigned' as team, '(unallocated)' as namespace,
        unallocated_gpu_hours as gpu_hours, cast(0 as double) as utilized_gpu_hours, cast(0 as double) as idle_gpu_hours,
        cast(0 as double) as measured_gpu_hours,
        net_unallocated_usd as direct_cost_usd, cast(0 as double) as idle_cost_usd,
        cast(0 as double) as shared_cost_usd,
        {%- if var('distribute_unallocated') %}
        case when share_basis is null then cast(0 as double) else -net_unallocated_usd end as unallocated_share_usd
        {%- else %}
        cast(0 as double) as unallocated_share_usd
        {%- endif %}
    from distribution
),

unioned as (
    select * from recipient_lines
    union all
    select * from shared_namespace_lines
    union all
    select * from overhead_lines
    union all
    select * from unallocated_lines
),

final as (
    select
        cast(day as date) as day,
        cluster,
        tenant,
        team,
        namespace,
        gpu_hours,
        utilized_gpu_hours,
        idle_gpu_hours,
        measured_gpu_hours,
        {{ idle_pct('idle_gpu_hours', 'measured_gpu_hours') }} as idle_allocated_pct,
        direct_cost_usd,
        idle_cost_usd,
        shared_cost_usd,
        unallocated_share_usd,
        direct_cost_usd + shared_cost_usd + unallocated_share_usd as chargeback_usd
    from unioned
)

select * from final
