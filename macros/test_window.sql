{#- Data tests in an incremental build check only the rows the build rebuilt.

    An incremental run rewrites each cluster's hours from its newest hour minus the lookback (and
    the whole days from there in the daily marts); the rows before were tested when they were
    built. `record_build_window` (an on-run-start hook) writes that cutoff per cluster, read from
    fct_node_hourly before any model runs, to the table `_build_window`; a full refresh (or a first
    build) writes it empty. `get_where_subquery` (dbt's hook for the `where` test config, overridden
    here) then filters a tested model that has `cluster` and `hour` (or `day`) columns to the window;
    a cluster not in the window (new, or landed late) is tested in full, and so is every model
    without those columns (dims, specs) and those in var `test_window_exempt` (their old rows can
    change in any build, e.g. a late bill). An empty window (full build) filters nothing.
    A `dbt test` invocation leaves the window as its build wrote it: a full build runs its data tests
    after its models, in a second invocation (transform/runner.py), and they test whole tables. -#}

{% macro record_build_window() -%}
  {%- if flags.WHICH == 'test' -%}{{ return('select 1') }}{%- endif -%}
  {%- set window = api.Relation.create(database=target_database(), schema=target.schema, identifier='_build_window') -%}
  {%- set nodes = adapter.get_relation(database=target_database(), schema=target.schema, identifier='fct_node_hourly') if execute else none -%}
  {%- if nodes is none or flags.FULL_REFRESH -%}
    {{ create_or_replace_table(window, "select cast(null as string) as cluster, cast(null as timestamp) as since where false") }}
  {%- else -%}
    {{ create_or_replace_table(window, "select cluster, max(hour) - " ~ hours_interval(var('incremental_lookback_hours'))
                                       ~ " as since from " ~ nodes ~ " group by cluster") }}
  {%- endif -%}
{%- endmacro %}


{% macro test_window_condition(relation, grain=none) -%}
  {#- SQL condition restricting `relation` to this build's window ('' = no restriction). grain='day'
      widens an hourly relation to whole days (a test comparing it with a daily mart). -#}
  {%- if not execute or relation is none -%}{{ return('') }}{%- endif -%}
  {%- if relation.identifier in var('test_window_exempt', []) -%}{{ return('') }}{%- endif -%}
  {#- (not adapter.get_relation: dbt's relation cache was filled before the hook made the table) -#}
  {%- set window = api.Relation.create(database=target_database(), schema=target.schema, identifier='_build_window') -%}
  {%- set rows = [] -%}
  {%- for r in run_query("select cluster, cast(since as string) from " ~ window ~ " where since is not null").rows -%}
    {%- do rows.append((r[0], r[1])) -%}
  {%- endfor -%}
  {%- if rows | length == 0 -%}{{ return('') }}{%- endif -%}
  {%- set names = relation_column_names(relation) -%}
  {%- if rows | length == 0 or 'cluster' not in names -%}{{ return('') }}{%- endif -%}
  {%- set since -%}
    (case
    {%- for row in rows %} when cluster = '{{ row[0] | replace("'", "''") }}' then cast('{{ row[1] }}' as timestamp){% endfor %}
     else {{ min_timestamp() }} end)
  {%- endset -%}
  {%- if 'hour' in names -%}
    {%- if grain == 'day' -%}
      {{ return('hour >= date_trunc(\'day\', ' ~ since ~ ')') }}
    {%- else -%}
      {{ return('hour >= ' ~ since) }}
    {%- endif -%}
  {%- elif 'day' in names -%}
    {{ return('day >= cast(date_trunc(\'day\', ' ~ since ~ ') as date)') }}
  {%- endif -%}
  {{ return('') }}
{%- endmacro %}


{% macro windowed(relation, grain=none) -%}
  {#- `relation`, restricted to this build's window (for singular tests). -#}
  {%- set cond = test_window_condition(relation, grain) -%}
  {%- if cond -%}(select * from {{ relation }} where {{ cond }}){%- else -%}{{ relation }}{%- endif -%}
{%- endmacro %}


{% macro get_where_subquery(relation) -%}
  {#- dbt's `where` config for generic tests, plus this build's window. -#}
  {%- set where = config.get('where') -%}
  {%- set conds = [] -%}
  {%- if where -%}{%- do conds.append('(' ~ where ~ ')') -%}{%- endif -%}
  {%- set cond = test_window_condition(relation) -%}
  {%- if cond -%}{%- do conds.append(cond) -%}{%- endif -%}
  {%- if conds -%}
    {%- set filtered -%}(select * from {{ relation }} where {{ conds | join(' and ') }}) dbt_subquery{%- endset -%}
    {{ return(filtered) }}
  {%- else -%}
    {{ return(relation) }}
  {%- endif -%}
{%- endmacro %}
