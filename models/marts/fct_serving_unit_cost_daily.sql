-- Serving unit economics per (day, cluster, namespace, workload, model): requests, tokens and the
-- workload's chargeback that day, giving cost per 1k requests and per 1M tokens.
--   direct_cost_usd / idle_cost_usd   Σ of the workload's pods that day (fct_workload_daily);
--   shared_cost_usd / unallocated_share_usd  the workload's part of its namespace's fct_showback_daily
--                                     shares (shared namespaces + fixed overhead, the unallocated
--                                     share), in proportion to its direct cost in the namespace;
--   cost_usd = direct + shared + unallocated share; a workload serving several models splits it by
--   their requests (evenly when it served none).
-- cost_per_1k_requests = cost / requests × 1e3 and cost_per_1m_tokens = cost / tokens × 1e6, null
-- when the count is 0 or unknown. Unmatched series (workload '(unmatched)') have requests, no cost.

with requests_daily as (
    select
        cast({{ dbt.date_trunc('day', 'hour') }} as date) as day,
        cluster, namespace, workload_kind, workload, model,
        max(team) as team, max(tenant) as tenant, bool_and(matched) as matched,
        sum(requests) as requests,
        sum(prompt_tokens) as prompt_tokens,
        sum(generation_tokens) as generation_tokens,
        sum(tokens) as tokens
    from {{ ref('fct_serving_requests_hourly') }}
    group by 1, 2, 3, 4, 5, 6
),

workload_cost as (
    -- the daily per-workload mart (Σ of fct_gpu_allocation_hourly per day): ~70× fewer rows to read
    select
        cast(day as date) as day,
        cluster, namespace, workload_kind, workload,
        sum(total_cost_usd) as direct_cost_usd,
        sum(idle_cost_usd) as idle_cost_usd,
        sum(gpu_hours) as gpu_hours
    from {{ ref('fct_workload_daily') }}
    group by 1, 2, 3, 4, 5
),

namespace_cost as (
    select day, cluster, namespace, sum(direct_cost_usd) as direct_cost_usd
    from workload_cost
    group by 1, 2, 3
),

namespace_shares as (
    select day, cluster, namespace, sum(shared_cost_usd) as shared_cost_usd,
           sum(unallocated_share_usd) as unallocated_share_usd
    from {{ ref('fct_showback_daily') }}
    group by 1, 2, 3
),

model_split as (
    select
        *,
        case
            when sum(coalesce(requests, 0)) over (partition by day, cluster, namespace, workload_kind, workload) > 0
                then coalesce(requests, 0) / sum(coalesce(requests, 0)) over (partition by day, cluster, namespace, workload_kind, workload)
            else 1.0 / count(*) over (partition by day, cluster, namespace, workload_kind, workload)
        end as model_share
    from requests_daily
),

costed as (
    select
        r.*,
        case when r.matched then r.model_share * w.direct_cost_usd end as direct_cost_usd,
        case when r.matched then r.model_share * w.idle_cost_usd end as idle_cost_usd,
        case when r.matched then r.model_share * w.gpu_hours end as gpu_hours,
        case when r.matched and n.direct_cost_usd > 0
             then r.model_share * coalesce(s.shared_cost_usd, 0) * w.direct_cost_usd / n.direct_cost_usd
             when r.matched then 0 end as shared_cost_usd,
        case when r.matched and n.direct_cost_usd > 0
             then r.model_share * coalesce(s.unallocated_share_usd, 0) * w.direct_cost_usd / n.direct_cost_usd
             when r.matched then 0 end as unallocated_share_usd
    from model_split as r
    left join workload_cost as w
        on r.day = w.day and r.cluster = w.cluster and r.namespace = w.namespace
        and r.workload_kind = w.workload_kind and r.workload = w.workload
    left join namespace_cost as n
        on r.day = n.day and r.cluster = n.cluster and r.namespace = n.namespace
    left join namespace_shares as s
        on r.day = s.day and r.cluster = s.cluster and r.namespace = s.namespace
),

final as (
    select
        day, cluster, namespace, workload_kind, workload, model, team, tenant, matched,
        requests, prompt_tokens, generation_tokens, tokens,
        gpu_hours, direct_cost_usd, idle_cost_usd, shared_cost_usd, unallocated_share_usd,
        direct_cost_usd + shared_cost_usd + unallocated_share_usd as cost_usd,
        case when requests > 0 then (direct_cost_usd + shared_cost_usd + unallocated_share_usd) / requests * 1e3 end
            as cost_per_1k_requests,
        case when tokens > 0 then (direct_cost_usd + shared_cost_usd + unallocated_share_usd) / tokens * 1e6 end
            as cost_per_1m_tokens
    from costed
)

select * from final
