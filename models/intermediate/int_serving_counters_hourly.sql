{{ config(materialized='table') }}
-- Request and token increases per serving series (cluster, namespace, pod, model) and hour, from the
-- cumulative counters of stg_serving__requests, the way Prometheus increase() reads a counter: each
-- sample adds v − previous v, or v itself when the counter went down (a reset: the server restarted
-- from 0). The first sample of a series adds nothing (its baseline is unknown), and increases are
-- not extrapolated to the hour's edges; a sample's increase counts in the hour of the sample.

with samples as (
    select * from {{ ref('stg_serving__requests') }}
),

deltas as (
    select
        cluster,
        {{ dbt.date_trunc('hour', 'ts') }} as hour,
        namespace,
        pod,
        model,
        {%- for c in ['requests_total', 'prompt_tokens_total', 'generation_tokens_total'] %}
        {{ counter_increase(c, 'cluster, namespace, pod, model', 'ts') }} as {{ c | replace('_total', '') }}{{ ',' if not loop.last }}
        {%- endfor %}
    from samples
),

final as (
    select
        cluster,
        hour,
        namespace,
        pod,
        model,
        sum(requests) as requests,
        sum(prompt_tokens) as prompt_tokens,
        sum(generation_tokens) as generation_tokens,
        count(*) as samples
    from deltas
    group by 1, 2, 3, 4, 5
)

select * from final
