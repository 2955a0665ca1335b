{#- Window evidence for the recommender, as DuckDB table macros stored in the warehouse (created by
    the post-hook of fct_workload_gpu_hourly): the recommender asks for any window
    [window_start, window_end) and gets sample-weighted means, maxima and exact merged-histogram
    quantiles (macro hist_quantiles), computed here and nowhere else.
      select * from gpu_workload_evidence_window(TIMESTAMP '...', TIMESTAMP '...')
      select * from gpu_device_evidence_window(TIMESTAMP '...', TIMESTAMP '...') -#}

{% macro create_evidence_window_macros() -%}
  {#- DuckDB table macros: only the DuckDB warehouse has them (on Spark the serving file would need
      them created over its views; docs/spark.md) -#}
  {{ return(adapter.dispatch('create_evidence_window_macros', 'gpufinops')()) }}
{%- endmacro %}

{% macro default__create_evidence_window_macros() -%}select 1{%- endmacro %}

{% macro duckdb__create_evidence_window_macros(relation=none) -%}
  {#- without the database: the macros must not name the file's catalog (a build is written as
      _building.duckdb and published under its version's name) -#}
  {%- set this = (relation if relation is not none else this).include(database=false) -%}
  {%- set evidence = ref('int_workload_gpu_evidence_hourly').include(database=false) -%}
  {%- set wl = ['cluster', 'namespace', 'workload'] -%}
  {%- set dev = ['cluster', 'namespace', 'workload', 'pod', 'hostname', 'device_id', 'mig_instance'] -%}
create or replace macro {{ this.schema }}.gpu_workload_evidence_window(window_start, window_end) as table
  with h as (
      select * from {{ this }} where hour >= window_start and hour < window_end
  ),
  hists as (
      -- the merged histograms of the window's workload-hours: int_workload_gpu_evidence_hourly holds
      -- them (the mart does not copy them); a workload-hour without evidence has none
      select e.cluster, e.namespace, e.workload, e.util_hist
      from {{ evidence }} as e
      inner join h
          on e.cluster = h.cluster and e.namespace = h.namespace and e.workload = h.workload and e.hour = h.hour
      where e.hour >= window_start and e.hour < window_end
  ),
  util_merged as {{ hist_list(hist_bucket_sums('hists', wl, 'util_hist'), wl) }},
  uq as {{ hist_quantiles('util_merged', wl, {'p50': 0.5, 'p95': 0.95}) }},
  s as (
      select cluster, namespace, workload,
             sum(samples) as samples,
             sum(util_mean * samples) / nullif(sum(case when util_mean is not null then samples end), 0) as util_mean,
             max(util_max) as util_max,
             max(fb_used_max_mib) as fb_used_max_mib,
             max(fb_total_mib) as fb_total_mib,
             count(*) as hours,
             count(*) filter (where samples > 0) as measured_hours
      from h
      group by cluster, namespace, workload
  )
  select s.*,
         {{ util_bucket_value('uq.p50') }} as util_p50,
         {{ util_bucket_value('uq.p95') }} as util_p95
  from s
  left join uq on s.cluster = uq.cluster and s.namespace = uq.namespace and s.workload = uq.workload;

create or replace macro {{ this.schema }}.gpu_device_evidence_window(window_start, window_end) as table
  with d as (
      select * from {{ ref('fct_gpu_device_evidence_hourly').include(database=false) }} where hour >= window_start and hour < window_end
  ),
  s as (
      -- one row per device in the window, numbered: the histogram merge groups and partitions by that
      -- integer, not by seven columns (at 1,000 nodes × 7 days: 27 s of the recommender's load)
      select {{ dev | join(', ') }}, row_number() over (order by {{ dev | join(', ') }}) as dev_id,
             sum(samples) as samples, max(util_max) as util_max,
             sum(util_mean * samples) / nullif(sum(case when util_mean is not null then samples end), 0) as util_mean
      from d
      group by {{ dev | join(', ') }}
  ),
  hists as (
      select s.dev_id, d.util_hist
      from d
      inner join s on {% for k in dev %}d.{{ k }} is not distinct from s.{{ k }}{{ ' and ' if not loop.last }}{% endfor %}
  ),
  util_merged as {{ hist_list(hist_bucket_sums('hists', ['dev_id'], 'util_hist'), ['dev_id']) }},
  q as {{ hist_quantiles('util_merged', ['dev_id'], {'p50': 0.5, 'p95': 0.95}) }}
  select {% for k in dev %}s.{{ k }}, {% endfor %}s.samples, s.util_max, s.util_mean,
         {{ util_bucket_value('q.p50') }} as util_p50, {{ util_bucket_value('q.p95') }} as util_p95
  from s
  left join q on s.dev_id = q.dev_id
{%- endmacro %}
