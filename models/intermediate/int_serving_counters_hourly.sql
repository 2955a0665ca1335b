{{ config(materialized='table') }}
-- Request and token increases per serving series (cluster, namespace, pod, model) and hour, from the
-- cumulative counters, the way Prometheus increase() reads a counter: each sample adds v − previous v,
-- or v itself when the counter went down (a reset: the server restarted from 0). The first sample of
-- a series adds nothing (its baseline is unknown), and increases are not extrapolated to the hour's
-- edges; a sample's increase counts in the hour of the sample.
-- Read from the lake's hourly rollups (macros/rollups.sql): each part (raw file, series, hour) holds
-- the increases between its own samples; the increase into its first sample is counter_step from
-- the last value of the part before it in the series (by time), so the sum is the per-sample one.

{%- set counters = ['requests', 'prompt_tokens', 'generation_tokens'] %}
{%- set series = 'cluster, namespace, pod, model' %}

with parts as (
    select * from {{ ref('stg_serving__hourly') }}
),

joined as (
    select
        cluster, hour, namespace, pod, model, samples,
        {%- for c in counters %}
        {{ c }}_inc as {{ c }}_inc,
        {{ counter_step('lag(' ~ c ~ '_last) over (partition by ' ~ series ~ ' order by first_ts)', c ~ '_first') }} as {{ c }}_into{{ ',' if not loop.last }}
        {%- endfor %}
    from parts
),

final as (
    select
        cluster,
        hour,
        namespace,
        pod,
        model,
        {%- for c in counters %}
        -- null only when every sample's increase is null (sum() of the per-sample increases)
        case when count({{ c }}_inc) + count({{ c }}_into) > 0
             then coalesce(sum({{ c }}_inc), 0) + coalesce(sum({{ c }}_into), 0) end as {{ c }},
        {%- endfor %}
        cast(sum(samples) as bigint) as samples
    from joined
    group by cluster, hour, namespace, pod, model
)

select * from final
