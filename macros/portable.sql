{#- Engine-specific SQL, each construct behind one adapter.dispatch macro with a DuckDB and a Spark
    implementation (docs/spark.md). The models call only these (and portable SQL): tests/test_spark_equivalence.py
    checks that no DuckDB-only function is left in models/, and that both engines build equal marts. -#}

{% macro last_by(value, ordering) -%}
  {#- `value` at the row of the largest `ordering`, null values included (arg_max skips them): what
      lag() over that ordering would hand the next row. -#}
  {{ return(adapter.dispatch('last_by', 'gpufinops')(value, ordering)) }}
{%- endmacro %}
{% macro duckdb__last_by(value, ordering) -%}
  arg_max(struct_pack(v := {{ value }}), {{ ordering }}).v
{%- endmacro %}
{% macro spark__last_by(value, ordering) -%}
  max_by(named_struct('v', {{ value }}), {{ ordering }}).v
{%- endmacro %}

{% macro arg_max(value, ordering, tie_break=false) -%}
  {#- `value` at the row of the largest `ordering`, over rows where both are non-null. tie_break: among
      rows of equal ordering the largest value (value must be orderable), so both engines agree. -#}
  {{ return(adapter.dispatch('arg_max', 'gpufinops')(value, ordering, tie_break)) }}
{%- endmacro %}
{% macro duckdb__arg_max(value, ordering, tie_break=false) -%}
  {%- if tie_break -%}arg_max({{ value }}, struct_pack(o := {{ ordering }}, v := {{ value }}))
  {%- else -%}arg_max({{ value }}, {{ ordering }}){%- endif -%}
{%- endmacro %}
{% macro spark__arg_max(value, ordering, tie_break=false) -%}
  {#- max_by returns null when the value at the largest ordering is null; DuckDB's arg_max skips such rows -#}
  {%- if tie_break -%}max_by({{ value }}, case when ({{ value }}) is not null and ({{ ordering }}) is not null
                                          then named_struct('o', {{ ordering }}, 'v', {{ value }}) end)
  {%- else -%}max_by({{ value }}, case when ({{ value }}) is not null then {{ ordering }} end){%- endif -%}
{%- endmacro %}

{% macro arg_min(value, ordering) -%}
  {{ return(adapter.dispatch('arg_min', 'gpufinops')(value, ordering)) }}
{%- endmacro %}
{% macro duckdb__arg_min(value, ordering) -%}arg_min({{ value }}, {{ ordering }}){%- endmacro %}
{% macro spark__arg_min(value, ordering) -%}
  min_by({{ value }}, case when ({{ value }}) is not null then {{ ordering }} end)
{%- endmacro %}


{% macro safe_cast(expr, type) -%}
  {#- cast, null where the value does not parse -#}
  {{ return(adapter.dispatch('safe_cast', 'gpufinops')(expr, type)) }}
{%- endmacro %}
{% macro duckdb__safe_cast(expr, type) -%}try_cast({{ expr }} as {{ type }}){%- endmacro %}
{% macro spark__safe_cast(expr, type) -%}try_cast({{ expr }} as {{ type }}){%- endmacro %}


{% macro explode_list(expr) -%}
  {#- one row per element of a list column (none for a null or empty list), in a select list -#}
  {{ return(adapter.dispatch('explode_list', 'gpufinops')(expr)) }}
{%- endmacro %}
{% macro duckdb__explode_list(expr) -%}unnest({{ expr }}){%- endmacro %}
{% macro spark__explode_list(expr) -%}explode({{ expr }}){%- endmacro %}


{% macro explode_merged_map(base, winner) -%}
  {#- one row per key of map `base` overlaid with map `winner` (winner's value where both have the
      key), as a struct `entry` with fields key and value; null maps count as empty -#}
  {{ return(adapter.dispatch('explode_merged_map', 'gpufinops')(base, winner)) }}
{%- endmacro %}
{% macro duckdb__explode_merged_map(base, winner) -%}
  unnest(map_entries(map_concat(coalesce({{ base }}, map()), coalesce({{ winner }}, map()))))
{%- endmacro %}
{% macro spark__explode_merged_map(base, winner) -%}
  {#- map_concat rejects duplicate keys unless spark.sql.mapKeyDedupPolicy = LAST_WIN; keep the
      winner's keys out of the base instead, so no session setting is needed -#}
  explode(map_entries(map_concat(
      map_filter(coalesce({{ base }}, cast(map() as map<string, double>)),
                 (k, v) -> not array_contains(map_keys(coalesce({{ winner }}, cast(map() as map<string, double>))), k)),
      coalesce({{ winner }}, cast(map() as map<string, double>)))))
{%- endmacro %}


{% macro sorted_string_agg(expr, sep) -%}
  {#- the non-null values joined by sep in ascending order; null when there are none -#}
  {{ return(adapter.dispatch('sorted_string_agg', 'gpufinops')(expr, sep)) }}
{%- endmacro %}
{% macro duckdb__sorted_string_agg(expr, sep) -%}string_agg({{ expr }}, '{{ sep }}' order by {{ expr }}){%- endmacro %}
{% macro spark__sorted_string_agg(expr, sep) -%}
  case when count({{ expr }}) > 0 then array_join(array_sort(collect_list({{ expr }})), '{{ sep }}') end
{%- endmacro %}


{% macro mode_of(expr) -%}
  {#- the most frequent non-null value (Spark: ties go to the smallest) -#}
  {{ return(adapter.dispatch('mode_of', 'gpufinops')(expr)) }}
{%- endmacro %}
{% macro duckdb__mode_of(expr) -%}mode({{ expr }}){%- endmacro %}
{% macro spark__mode_of(expr) -%}mode({{ expr }}, true){%- endmacro %}


{% macro hours_interval(n) -%}
  {#- an interval of n hours (n may be fractional), to add to or subtract from a timestamp -#}
  {{ return(adapter.dispatch('hours_interval', 'gpufinops')(n)) }}
{%- endmacro %}
{% macro duckdb__hours_interval(n) -%}
  to_microseconds(cast(round(({{ n }}) * 3600000000) as bigint))
{%- endmacro %}
{% macro spark__hours_interval(n) -%}
  make_dt_interval(0, 0, 0, cast(round(({{ n }}) * 3600000000) / 1000000 as decimal(18, 6)))
{%- endmacro %}


{% macro day_string(ts) -%}
  {#- 'YYYY-MM-DD' of a timestamp (the lake's day= partition name) -#}
  {{ return(adapter.dispatch('day_string', 'gpufinops')(ts)) }}
{%- endmacro %}
{% macro duckdb__day_string(ts) -%}strftime({{ ts }}, '%Y-%m-%d'){%- endmacro %}
{% macro spark__day_string(ts) -%}date_format({{ ts }}, 'yyyy-MM-dd'){%- endmacro %}


{% macro min_timestamp() -%}
  {#- a timestamp before every other -#}
  {{ return(adapter.dispatch('min_timestamp', 'gpufinops')()) }}
{%- endmacro %}
{% macro duckdb__min_timestamp() -%}cast('-infinity' as timestamp){%- endmacro %}
{% macro spark__min_timestamp() -%}cast('0001-01-01 00:00:00' as timestamp){%- endmacro %}


{% macro spark__epoch_seconds(col) -%}(unix_micros(cast({{ col }} as timestamp_ltz)) / 1e6){%- endmacro %}


{% macro create_or_replace_table(relation, sql) -%}
  {#- a small bookkeeping table (e.g. _build_window), replaced -#}
  {{ return(adapter.dispatch('create_or_replace_table', 'gpufinops')(relation, sql)) }}
{%- endmacro %}
{% macro duckdb__create_or_replace_table(relation, sql) -%}create or replace table {{ relation }} as {{ sql }}{%- endmacro %}
{% macro spark__create_or_replace_table(relation, sql) -%}
  {%- do run_query("drop table if exists " ~ relation) -%}
  create table {{ relation }} using parquet as {{ sql }}
{%- endmacro %}


{% macro relation_column_names(relation) -%}
  {#- lower-case column names of a relation that exists -#}
  {{ return(adapter.dispatch('relation_column_names', 'gpufinops')(relation)) }}
{%- endmacro %}
{% macro duckdb__relation_column_names(relation) -%}
  {%- set res = run_query("select lower(column_name) from duckdb_columns() where schema_name = '" ~ relation.schema
      ~ "' and table_name = '" ~ relation.identifier ~ "'") -%}
  {{ return(res.columns[0].values() | list) }}
{%- endmacro %}
{% macro spark__relation_column_names(relation) -%}
  {%- set names = [] -%}
  {%- for c in adapter.get_columns_in_relation(relation) -%}{%- do names.append(c.name | lower) -%}{%- endfor -%}
  {{ return(names) }}
{%- endmacro %}


{% macro incremental_by(unique_key, partition_by=none) -%}
  {#- The config of an incremental model that replaces the rows of `unique_key` it rebuilds.
      DuckDB: delete+insert on unique_key. Spark: insert_overwrite of dynamic Parquet partitions
      `partition_by` (the same grain as unique_key: cluster + hour, or cluster + day); a model whose
      key is no partition grain (no partition_by) is rebuilt as a table on Spark (Delta's merge would
      need the Delta jars; docs/spark.md). -#}
  {{ return(adapter.dispatch('incremental_by', 'gpufinops')(unique_key, partition_by)) }}
{%- endmacro %}
{% macro duckdb__incremental_by(unique_key, partition_by=none) -%}
  {%- do config(materialized='incremental', incremental_strategy='delete+insert', unique_key=unique_key) -%}
{%- endmacro %}
{% macro spark__incremental_by(unique_key, partition_by=none) -%}
  {%- if partition_by -%}
    {%- do config(materialized='incremental', incremental_strategy='insert_overwrite', partition_by=partition_by,
                  file_format='parquet') -%}
  {%- else -%}
    {%- do config(materialized='table', file_format='parquet') -%}
  {%- endif -%}
{%- endmacro %}


{% macro target_database() -%}
  {#- the target's database for api.Relation.create / get_relation (Spark has schemas only) -#}
  {{ return(adapter.dispatch('target_database', 'gpufinops')()) }}
{%- endmacro %}
{% macro default__target_database() -%}{{ return(target.database) }}{%- endmacro %}
{% macro spark__target_database() -%}{{ return(none) }}{%- endmacro %}


{% macro empty_map(key_type, value_type) -%}
  {{ return(adapter.dispatch('empty_map', 'gpufinops')(key_type, value_type)) }}
{%- endmacro %}
{% macro duckdb__empty_map(key_type, value_type) -%}map(){%- endmacro %}
{% macro spark__empty_map(key_type, value_type) -%}cast(map() as map<{{ key_type }}, {{ value_type }}>){%- endmacro %}


{% macro any_key_like(map_expr, pattern) -%}
  {#- whether any key of the map matches the LIKE pattern -#}
  {{ return(adapter.dispatch('any_key_like', 'gpufinops')(map_expr, pattern)) }}
{%- endmacro %}
{% macro duckdb__any_key_like(map_expr, pattern) -%}
  coalesce(len(list_filter(map_keys({{ map_expr }}), lambda k: k like '{{ pattern }}')) > 0, false)
{%- endmacro %}
{% macro spark__any_key_like(map_expr, pattern) -%}
  coalesce(exists(map_keys({{ map_expr }}), k -> k like '{{ pattern }}'), false)
{%- endmacro %}


{% macro empty_list_of_pairs() -%}
  {{ return(adapter.dispatch('empty_list_of_pairs', 'gpufinops')()) }}
{%- endmacro %}
{% macro duckdb__empty_list_of_pairs() -%}[]{%- endmacro %}
{% macro spark__empty_list_of_pairs() -%}array(){%- endmacro %}


{% macro grouping_bits(columns) -%}
  {#- the grouping-set bitmask of the columns (1 = rolled up), leftmost column the highest bit -#}
  {{ return(adapter.dispatch('grouping_bits', 'gpufinops')(columns)) }}
{%- endmacro %}
{% macro duckdb__grouping_bits(columns) -%}grouping({{ columns | join(', ') }}){%- endmacro %}
{% macro spark__grouping_bits(columns) -%}
  {#- grouping_id() must name every grouping column; sum the single-column bits instead -#}
  ({% for c in columns %}grouping({{ c }}) * {{ 2 ** (columns | length - loop.index) }}{{ " + " if not loop.last }}{% endfor %})
{%- endmacro %}


{% macro struct_list(fields, condition=none) -%}
  {#- aggregate: the list of structs {name: expr, ...} (fields: [[name, expr], ...]) of the group's rows
      (where condition holds), sorted by the first field; null when there are none -#}
  {{ return(adapter.dispatch('struct_list', 'gpufinops')(fields, condition)) }}
{%- endmacro %}
{% macro duckdb__struct_list(fields, condition=none) -%}
  list({{ duckdb__make_struct(fields) }} order by {{ fields[0][1] }})
  {%- if condition %} filter (where {{ condition }}){% endif %}
{%- endmacro %}
{% macro spark__struct_list(fields, condition=none) -%}
  {%- set s = spark__make_struct(fields) -%}
  {%- if condition -%}
  case when count(case when {{ condition }} then 1 end) > 0 then array_sort(collect_list(case when {{ condition }} then {{ s }} end)) end
  {%- else -%}
  case when count(*) > 0 then array_sort(collect_list({{ s }})) end
  {%- endif -%}
{%- endmacro %}


{#- dbt's own cross-database date macros, for Spark: dbt-spark's dateadd / datediff go through
    to_unix_timestamp (whole seconds) and return local-time timestamps; these keep microseconds and
    naive timestamps. Picked up through the `dispatch` search order in dbt_project.yml. -#}
{% macro spark__dateadd(datepart, interval, from_date_or_timestamp) -%}
  timestampadd({{ datepart | upper }}, {{ interval }}, {{ from_date_or_timestamp }})
{%- endmacro %}
{% macro spark__datediff(first_date, second_date, datepart) -%}
  timestampdiff({{ datepart | upper }}, {{ first_date }}, {{ second_date }})
{%- endmacro %}


{% macro hist_count(hist) -%}
  {#- the total count of a histogram column (a list of {b, n} pairs), 0 for an empty one -#}
  {{ return(adapter.dispatch('hist_count', 'gpufinops')(hist)) }}
{%- endmacro %}
{% macro duckdb__hist_count(hist) -%}coalesce(list_sum(list_transform({{ hist }}, lambda e: e.n)), 0){%- endmacro %}
{% macro spark__hist_count(hist) -%}coalesce(aggregate({{ hist }}, cast(0 as bigint), (acc, e) -> acc + e.n), 0){%- endmacro %}


{% macro list_fold(list, start, acc, element, step) -%}
  {#- a left fold of a list column: `start`, then `step` (an expression of the names `acc` and
      `element`) applied to each element in order; `start` for an empty list -#}
  {{ return(adapter.dispatch('list_fold', 'gpufinops')(list, start, acc, element, step)) }}
{%- endmacro %}
{% macro duckdb__list_fold(list, start, acc, element, step) -%}
  list_reduce({{ list }}, lambda {{ acc }}, {{ element }}: {{ step }}, {{ start }})
{%- endmacro %}
{% macro spark__list_fold(list, start, acc, element, step) -%}
  aggregate({{ list }}, {{ start }}, ({{ acc }}, {{ element }}) -> {{ step }})
{%- endmacro %}


{% macro make_struct(fields) -%}
  {#- a struct value of `fields` ([[name, expr], ...]) -#}
  {{ return(adapter.dispatch('make_struct', 'gpufinops')(fields)) }}
{%- endmacro %}
{% macro duckdb__make_struct(fields) -%}
  struct_pack({% for f in fields %}{{ f[0] }} := {{ f[1] }}{{ ", " if not loop.last }}{% endfor %})
{%- endmacro %}
{% macro spark__make_struct(fields) -%}
  named_struct({% for f in fields %}'{{ f[0] }}', {{ f[1] }}{{ ", " if not loop.last }}{% endfor %})
{%- endmacro %}


{% macro duckdb__get_delete_insert_merge_sql(target, source, unique_key, dest_columns, incremental_predicates) -%}
  {#- dbt-duckdb's delete+insert, with the delete as a semi-join on the distinct keys of the new rows:
      its `delete ... using source where key = key` joins every target row of an hour with every new row
      of that hour (pod-hours squared: 0.73 s → 0.02 s for fct_gpu_allocation_hourly's window at
      1,000 nodes, a minute for a table rebuilt whole through it). Same rows deleted. -#}
  {%- set dest_cols_csv = get_quoted_csv(dest_columns | map(attribute="name")) -%}
  {%- if unique_key -%}
    {%- set keys = [unique_key] if unique_key is string else unique_key -%}
    delete from {{ target }}
    where ({{ keys | join(', ') }}) in (select distinct {{ keys | join(', ') }} from {{ source }})
    {%- for predicate in incremental_predicates or [] %}
      and {{ predicate }}
    {%- endfor %};
  {%- endif %}

    insert into {{ target }} ({{ dest_cols_csv }})
    (
        select {{ dest_cols_csv }}
        from {{ source }}
    )
{%- endmacro %}


{% macro key_hash(columns) -%}
  {#- a 64-bit hash of the columns (nulls included). Two uses: to find rows whose key no other row
      shares (equal hashes are then resolved by the columns themselves, test unique_combination), and as
      the join key of pods and devices in int_pod_utilization_hourly, int_pod_costs_hourly and
      int_pod_allocation_hourly's MIG layout lookup, of workloads in int_workload_gpu_evidence_hourly, of
      workload container-hours in fct_container_usage_hourly and the partition of serving series in
      int_serving_counters_hourly, which tests/dbt/assert_pod_keys_one_to_one
      checks no two identities share -#}
  {{ return(adapter.dispatch('key_hash', 'gpufinops')(columns)) }}
{%- endmacro %}
{% macro duckdb__key_hash(columns) -%}hash({{ columns | join(', ') }}){%- endmacro %}
{% macro spark__key_hash(columns) -%}xxhash64({{ columns | join(', ') }}){%- endmacro %}


{% macro pod_key(alias=none) -%}
  {#- A pod's join key in the allocation chain: key_hash of its identity (cluster, namespace, pod), of
      the relation `alias` when given. One definition, so that both sides of every join hash the same
      columns in the same order (tests/dbt/assert_pod_keys_one_to_one). -#}
  {%- set p = alias ~ '.' if alias else '' -%}
  {{ key_hash([p ~ 'cluster', p ~ 'namespace', p ~ 'pod']) }}
{%- endmacro %}

{% macro workload_key(alias=none) -%}
  {#- A workload's key: key_hash of (cluster, namespace, workload). int_workload_gpu_evidence_hourly groups
      its device rows' histogram buckets by (hour, this key) instead of numbering its workload-hours and
      joining the device rows back to them on four columns (tests/dbt/assert_pod_keys_one_to_one). -#}
  {%- set p = alias ~ '.' if alias else '' -%}
  {{ key_hash([p ~ 'cluster', p ~ 'namespace', p ~ 'workload']) }}
{%- endmacro %}

{% macro container_group_key(alias=none) -%}
  {#- A workload container-hour's key: key_hash of (cluster, hour, namespace, workload, container).
      fct_container_usage_hourly merges its parts' CPU and memory histograms by it instead of numbering
      its groups and joining the parts back to them on five columns (tests/dbt/assert_pod_keys_one_to_one). -#}
  {%- set p = alias ~ '.' if alias else '' -%}
  {{ key_hash([p ~ 'cluster', p ~ 'hour', p ~ 'namespace', p ~ 'workload', p ~ 'container']) }}
{%- endmacro %}

{% macro serving_series_key(alias=none) -%}
  {#- A serving series' key: key_hash of (cluster, namespace, pod, model). int_serving_counters_hourly's
      lag() partitions its parts by it instead of by the four text columns (tests/dbt/assert_pod_keys_one_to_one). -#}
  {%- set p = alias ~ '.' if alias else '' -%}
  {{ key_hash([p ~ 'cluster', p ~ 'namespace', p ~ 'pod', p ~ 'model']) }}
{%- endmacro %}

{% macro device_key(alias=none) -%}
  {#- A GPU device's (or MIG instance's) join key: key_hash of (cluster, hostname, device_id, mig_instance). -#}
  {%- set p = alias ~ '.' if alias else '' -%}
  {{ key_hash([p ~ 'cluster', p ~ 'hostname', p ~ 'device_id', p ~ 'mig_instance']) }}
{%- endmacro %}
