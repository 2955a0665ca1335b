{{ incremental_by(['cluster', 'hour']) }}
{{ config(on_schema_change='append_new_columns') }}
-- Request and token increases per serving series (cluster, namespace, pod, model) and hour, from the
-- cumulative counters, the way Prometheus increase() reads a counter: each sample adds v − previous v,
-- or v itself when the counter went down (a reset: the server restarted from 0). The first sample of
-- a series adds nothing (its baseline is unknown), and increases are not extrapolated to the hour's
-- edges; a sample's increase counts in the hour of the sample.
-- Read from the lake's hourly rollups (macros/rollups.sql): each part (raw file, series, hour) holds
-- the increases between its own samples; the increase into its first sample is counter_step from
-- the last value of the part before it in the series (by time), so the sum is the per-sample one. In
-- an hour one raw file holds, a series has one part, passed through; other hours sum their parts.
-- Incremental per (cluster, hour), from the usual cutoff or, when serving counters landed late (a
-- back-fill), from the oldest hour of those runs (macro incremental_since, late_table). Each row keeps its
-- series' last part of the hour (last_part_ts and the counters' last values), so a rebuilt window
-- resumes every series from the part before it, exactly as a full build's lag() does.
-- lag() partitions by the series' 64-bit key (macro serving_series_key; tests/dbt/assert_pod_keys_one_to_one),
-- not by its four text columns (alone at 1,000 nodes: 4.7-5.0 -> 3.8-4.2 CPU-s).

{%- set counters = ['requests', 'prompt_tokens', 'generation_tokens'] %}
{%- set series_hour = 'cluster, hour, namespace, pod, model' %}
{#- a table from before this model kept its last parts is rebuilt whole, once -#}
{%- set resume = is_incremental() and execute and 'last_part_ts' in relation_column_names(this) %}

with new_parts as {{ not_materialized() }} (
    -- not materialised: the file-hour list below reads (cluster, hour, source_file) only
    select
        src.cluster, src.hour, src.namespace, src.pod, src.model, src.samples, src.first_ts,
        {%- for c in counters %}
        src.{{ c }}_first, src.{{ c }}_last, src.{{ c }}_inc,
        {%- endfor %}
        src.source_file,
        false as is_carry
    from {{ ref('stg_serving__hourly') }} as src
    {%- if resume %}
    where {{ incremental_since('src.hour', late_table='serving_requests') }}
    {%- endif %}
),

{%- if resume %}

kept as (
    -- each series' last part before the rebuilt window: the part the window's first part follows
    select
        cluster, namespace, pod, model,
        max(hour) as hour,
        max(last_part_ts) as last_part_ts,
        {%- for c in counters %}
        {{ last_by(c ~ '_last', 'last_part_ts') }} as {{ c }}_last{{ ',' if not loop.last }}
        {%- endfor %}
    from {{ this }} as t
    where not ({{ incremental_since('t.hour', cluster='t.cluster', late_table='serving_requests') }})
    group by cluster, namespace, pod, model
),

parts as (
    select * from new_parts
    union all
    select
        cluster, hour, namespace, pod, model, 0 as samples, last_part_ts as first_ts,
        {%- for c in counters %}
        cast(null as double) as {{ c }}_first, {{ c }}_last, cast(null as double) as {{ c }}_inc,
        {%- endfor %}
        cast(null as {{ landing_type('varchar') }}) as source_file,
        true as is_carry
    from kept
),
{%- else %}

parts as (
    select * from new_parts
),
{%- endif %}

joined as (
    select
        cluster, hour, namespace, pod, model, samples, first_ts, is_carry,
        {%- for c in counters %}
        {{ c }}_inc as {{ c }}_inc,
        {{ c }}_last as {{ c }}_last,
        {{ counter_step('lag(' ~ c ~ '_last) over (partition by ' ~ serving_series_key() ~ ' order by first_ts)', c ~ '_first') }} as {{ c }}_into{{ ',' if not loop.last }}
        {%- endfor %}
    from parts
),

-- an hour one raw file holds has one part per series: its row is the series-hour as it is (no GROUP
-- BY over every part); an hour several files hold (two runs within the hour) sums its parts
multi_file as {{ multi_file_hours('new_parts') }},

flagged as (
    -- the rows flagged by a left join, not split by an anti and a semi join (macro file_hour_rows):
    -- DuckDB built those joins' hash tables on the 2.2 M window rows, not on the short list (the
    -- model alone at 1,000 nodes × 30 days, docs/bench.md: 6.1 -> 4.0-4.2 CPU-s, peak 1.5 -> 1.0 GB)
    select j.*, m.cluster is not null as several_files
    from joined as j
    left join multi_file as m
        on j.cluster = m.cluster and j.hour = m.hour
),

final as (
    -- a series-hour held by one part (an hour one file holds): the part as it is
    select
        {{ series_hour }},
        {%- for c in counters %}
        case when {{ c }}_inc is not null or {{ c }}_into is not null
             then coalesce({{ c }}_inc, 0) + coalesce({{ c }}_into, 0) end as {{ c }},
        {%- endfor %}
        cast(samples as bigint) as samples,
        first_ts as last_part_ts,
        {%- for c in counters %}
        {{ c }}_last{{ ',' if not loop.last }}
        {%- endfor %}
    from flagged
    where not several_files and not is_carry
    union all
    -- the parts of an hour several files hold, summed
    select
        {{ series_hour }},
        {%- for c in counters %}
        -- null only when every sample's increase is null (sum() of the per-sample increases)
        case when count({{ c }}_inc) + count({{ c }}_into) > 0
             then coalesce(sum({{ c }}_inc), 0) + coalesce(sum({{ c }}_into), 0) end as {{ c }},
        {%- endfor %}
        cast(sum(samples) as bigint) as samples,
        -- the hour's last part: where the next hour's first part resumes in an incremental run
        max(first_ts) as last_part_ts,
        {%- for c in counters %}
        {{ last_by(c ~ '_last', 'first_ts') }} as {{ c }}_last{{ ',' if not loop.last }}
        {%- endfor %}
    from flagged
    where several_files and not is_carry
    group by {{ series_hour }}
)

select * from final
