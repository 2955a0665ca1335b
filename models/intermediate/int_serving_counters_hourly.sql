{{ incremental_by(['cluster', 'hour']) }}
{{ config(on_schema_change='append_new_columns') }}
-- depends_on: {{ ref('stg_serving__requests') }}
-- Request and token increases per serving series (cluster, namespace, pod, model) and hour, from the
-- cumulative counters of stg_serving__requests, the way Prometheus increase() reads a counter: each
-- sample adds v − previous v, or v itself when the counter went down (a reset: the server restarted
-- from 0). The first sample of a series adds nothing (its baseline is unknown), and increases are
-- not extrapolated to the hour's edges; a sample's increase counts in the hour of the sample.
-- Incremental per (cluster, hour): each row keeps its series' last sample of the hour (last_ts and the
-- three counters there, nulls included), so a rebuilt window starts every series from the last sample
-- before it, exactly as a full build's lag() does, without re-reading the history.

{%- set counters = ['requests_total', 'prompt_tokens_total', 'generation_tokens_total'] %}
{%- set series = 'cluster, namespace, pod, model' %}

with new_samples as (
    select cluster, ts, namespace, pod, model, {{ counters | join(', ') }}, false as is_baseline
    from {{ landing_input('stg_serving__requests', 'serving_requests', time_column='hour') }} as src
    {%- if is_incremental() %}
    where src.ts >= {{ incremental_cutoff_sql('hour', 'src.cluster') }}
    {%- endif %}
),

{%- if is_incremental() %}

kept_hours as (
    -- the rows this run keeps (before the rebuilt window), latest hour first per series
    select t.*, row_number() over (partition by {{ series }} order by t.hour desc) as rn
    from {{ this }} as t
    where t.hour < {{ incremental_cutoff_sql('hour', 't.cluster') }}
),

baselines as (
    select cluster, last_ts as ts, namespace, pod, model,
           {%- for c in counters %} last_{{ c }} as {{ c }},{% endfor %} true as is_baseline
    from kept_hours
    where rn = 1
),

samples as (
    select * from new_samples
    union all
    select * from baselines
),
{%- else %}

samples as (
    select * from new_samples
),
{%- endif %}

deltas as (
    select
        cluster,
        {{ dbt.date_trunc('hour', 'ts') }} as hour,
        namespace,
        pod,
        model,
        ts,
        is_baseline,
        {%- for c in counters %}
        {{ c }},
        {{ counter_increase(c, series, 'ts') }} as {{ c | replace('_total', '') }},
        {%- endfor %}
        row_number() over (partition by {{ series }}, {{ dbt.date_trunc('hour', 'ts') }} order by ts desc) as from_last
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
        count(*) as samples,
        max(ts) as last_ts,
        {%- for c in counters %}
        max(case when from_last = 1 then {{ c }} end) as last_{{ c }}{{ ',' if not loop.last }}
        {%- endfor %}
    from deltas
    where not is_baseline
    group by 1, 2, 3, 4, 5
)

select * from final
