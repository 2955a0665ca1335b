{#- The project's incremental materialisation on DuckDB: the same delete+insert as dbt-duckdb's, in
    fewer statements and far less Jinja per node.

    An hourly build runs ~40 incremental models, and most of each node's time there is dbt's own
    Python, not SQL (docs/bench.md, twenty-second session). dbt-duckdb's materialisation looks up
    intermediate and backup relations, widens column types, reads the target's columns three times
    through dbt's schema-change machinery and renders grants and docs the project does not use. This
    one, for a table that already exists:
      1. writes the rebuilt window to `<model>__gf_new`: a temp table for a SQL model, whose SQL reads
         `this` for its cutoffs, so the new rows are made before anything is deleted; a table beside
         the model for a Python model, which cannot write a temp table;
      2. reads the columns of both in one query of `duckdb_columns()`;
      3. in the model's transaction: with on_schema_change='append_new_columns', `alter table add
         column` for the new columns; then the delete of the keys the new rows hold and the insert
         (macro get_delete_insert_merge_sql); then it drops `<model>__gf_new`;
      4. runs the hooks, in and after the transaction, as dbt does.
    The columns inserted are dbt's: the target's with 'ignore', the new rows' with
    'append_new_columns'. 'fail' and 'sync_all_columns' are refused, as is any strategy but
    delete+insert (no model uses them). A model built for the first time, rebuilt in full
    (--full-refresh) or replacing a view is made with dbt's create_table_as, as before, after the old
    relation is dropped: every build works on its own copy of the warehouse, which a failed build
    discards (transform/publish.py). -#}
{% materialization incremental, adapter='duckdb', supported_languages=['sql', 'python'] -%}
  {%- set language = model['language'] -%}
  {%- set existing = load_cached_relation(this) -%}
  {%- set target = this.incorporate(type='table') -%}
  {%- set on_schema_change = config.get('on_schema_change') or 'ignore' -%}
  {%- if on_schema_change not in ('ignore', 'append_new_columns') -%}
    {{ exceptions.raise_compiler_error("model " ~ model.name ~ ": on_schema_change='" ~ on_schema_change
       ~ "' is not supported by the project's incremental materialisation (macros/materializations.sql); use"
       ~ " 'ignore' or 'append_new_columns'") }}
  {%- endif -%}
  {%- if (config.get('incremental_strategy') or 'delete+insert') != 'delete+insert' -%}
    {{ exceptions.raise_compiler_error("model " ~ model.name ~ ": incremental_strategy='"
       ~ config.get('incremental_strategy') ~ "' is not supported by the project's incremental materialisation"
       ~ " (macros/materializations.sql); it runs delete+insert") }}
  {%- endif -%}

  {{ run_hooks(pre_hooks, inside_transaction=False) }}
  {{ run_hooks(pre_hooks, inside_transaction=True) }}

  {%- if existing is none or existing.is_view or should_full_refresh() -%}
    {%- if existing is not none -%}
      {% do adapter.drop_relation(existing) %}
    {%- endif -%}
    {% call statement('main', language=language) -%}
      {{ create_table_as(False, target, compiled_code, language) }}
    {%- endcall %}
  {%- else -%}
    {%- set batch_name = this.identifier ~ '__gf_new' -%}
    {%- if language == 'python' -%}
      {%- set batch = api.Relation.create(database=target.database, schema=target.schema, identifier=batch_name, type='table') -%}
      {% do adapter.drop_relation(batch) %}
      {% call statement('batch', language='python') -%}
        {{ create_table_as(False, batch, compiled_code, 'python') }}
      {%- endcall %}
    {%- else -%}
      {%- set batch = api.Relation.create(database='temp', schema='main', identifier=batch_name, type='table') -%}
      {% do run_query('create or replace temp table ' ~ batch ~ ' as (\n' ~ compiled_code ~ '\n)') %}
    {%- endif -%}
    {%- set is_batch = "database_name = '" ~ batch.database ~ "' and schema_name = '" ~ batch.schema
        ~ "' and table_name = '" ~ batch_name ~ "'" -%}
    {%- set res = run_query("select " ~ is_batch ~ ", column_name, data_type from duckdb_columns() where (" ~ is_batch
        ~ ") or (database_name = '" ~ target.database ~ "' and schema_name = '" ~ target.schema
        ~ "' and table_name = '" ~ target.identifier ~ "') order by column_index") -%}
    {%- set old = [] -%}
    {%- set new = [] -%}
    {%- for is_new, name, data_type in res.rows -%}
      {%- do (new if is_new else old).append({'name': name, 'data_type': data_type}) -%}
    {%- endfor -%}
    {%- set old_names = old | map(attribute='name') | list -%}
    {%- set added = [] -%}
    {%- if on_schema_change == 'append_new_columns' -%}
      {%- for c in new if c.name not in old_names -%}{%- do added.append(c) -%}{%- endfor -%}
    {%- endif -%}
    {% call statement('main') -%}
      {%- for c in added %}
      alter table {{ target }} add column {{ adapter.quote(c.name) }} {{ c.data_type }};
      {%- endfor %}
      {{ get_delete_insert_merge_sql(target, batch, config.get('unique_key'),
                                     new if on_schema_change == 'append_new_columns' else old,
                                     config.get('incremental_predicates') or config.get('predicates')) }};
      drop table {{ batch }}
    {%- endcall %}
  {%- endif -%}

  {{ run_hooks(post_hooks, inside_transaction=True) }}
  {% do adapter.commit() %}
  {{ run_hooks(post_hooks, inside_transaction=False) }}
  {{ return({'relations': [target]}) }}
{%- endmaterialization %}


{#- The project's table materialisation on DuckDB. dbt-duckdb's builds the new table under a temporary
    name, looks up and drops indexes, renames the old table to a backup, renames the new one into place
    and drops the backup, with the Jinja for grants and docs besides: six statements and a few hundred
    milliseconds of dbt's Python per table. The hourly build rebuilds about 15 small tables whole. Here
    the old relation (a table or a view) is dropped and the new one created in one statement, in the
    model's transaction: a reader of the build's copy sees one or the other, and a failure rolls both
    back. SQL models only: no Python model is a table on DuckDB. -#}
{% materialization table, adapter='duckdb', supported_languages=['sql'] -%}
  {%- set existing = load_cached_relation(this) -%}
  {%- set target = this.incorporate(type='table') -%}
  {{ run_hooks(pre_hooks, inside_transaction=False) }}
  {{ run_hooks(pre_hooks, inside_transaction=True) }}
  {% call statement('main') -%}
    {%- if existing is not none %}
    drop {{ 'view' if existing.is_view else 'table' }} if exists {{ existing }};
    {%- endif %}
    {{ create_table_as(False, target, compiled_code) }}
  {%- endcall %}
  {{ run_hooks(post_hooks, inside_transaction=True) }}
  {% do adapter.commit() %}
  {{ run_hooks(post_hooks, inside_transaction=False) }}
  {{ return({'relations': [target]}) }}
{%- endmaterialization %}
