{#- The spend lines budgets are checked against (fct_budget_run_rate_daily), and the record of them an
    incremental build compares with to find the first day whose lines changed. -#}

{% macro budget_spend_lines(showback, workload_daily) -%}
{#- One line per day and scope: fleet (Σ chargeback of every showback line), team (Σ chargeback of the
    team's own namespaces), workload (Σ its direct cost). `showback`, `workload_daily`: relations of
    fct_showback_daily and fct_workload_daily. -#}
{%- set excluded = (var('shared_namespaces') | list) + ["(unallocated)", "(overhead)"] %}
{%- set workload_columns = ['workload_cluster', 'namespace', 'workload_kind', 'workload'] %}
select
    day,
    'fleet' as scope_kind,
    'fleet' as scope_id,
    cast(null as {{ dbt.type_string() }}) as team,
    {%- for c in workload_columns %}
    cast(null as {{ dbt.type_string() }}) as {{ c }},
    {%- endfor %}
    sum(chargeback_usd) as spend_usd
from {{ showback }}
group by day
union all
select
    day,
    'team' as scope_kind,
    concat('team:', team) as scope_id,
    team,
    {%- for c in workload_columns %}
    cast(null as {{ dbt.type_string() }}) as {{ c }},
    {%- endfor %}
    sum(chargeback_usd) as spend_usd
from {{ showback }}
where namespace not in ({% for ns in excluded %}'{{ ns }}'{{ ", " if not loop.last }}{% endfor %})
group by day, team
union all
select
    day,
    'workload' as scope_kind,
    concat('workload:', cluster, '/', namespace, '/', coalesce(workload_kind, ''), '/', workload) as scope_id,
    max(team) as team,
    cluster as workload_cluster,
    namespace,
    workload_kind,
    workload,
    sum(total_cost_usd) as spend_usd
from {{ workload_daily }}
group by day, cluster, namespace, workload_kind, workload
{%- endmacro %}


{% macro budget_lines_record() -%}
  {#- The table an incremental DuckDB build of fct_budget_run_rate_daily compares this build's spend lines
      with: the lines of the build that made the live version (written by the model's post-hook), or
      none (then every day is rebuilt). -#}
  {{ return(adapter.get_relation(database=target_database(), schema=target.schema, identifier='_budget_spend_lines')) }}
{%- endmacro %}


{% macro record_budget_lines(showback, workload_daily) -%}
  {{ return(adapter.dispatch('record_budget_lines', 'gpufinops')(showback, workload_daily)) }}
{%- endmacro %}

{% macro default__record_budget_lines(showback, workload_daily) -%}select 1{%- endmacro %}

{% macro duckdb__record_budget_lines(showback, workload_daily) -%}
  {#- the spend lines of this build, for the next incremental build's comparison (a bookkeeping table of
      the version, like _build_window); Spark rebuilds the mart whole (macro incremental_by) -#}
create or replace table {{ target.schema }}._budget_spend_lines as
{{ budget_spend_lines(showback, workload_daily) }}
{%- endmacro %}
