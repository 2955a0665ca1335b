{% macro drop_python_tmp_tables() -%}
  {{ return(adapter.dispatch('drop_python_tmp_tables', 'gpufinops')()) }}
{%- endmacro %}

{% macro default__drop_python_tmp_tables() -%}{%- endmacro %}

{% macro duckdb__drop_python_tmp_tables() -%}
  {#- Post-hook of an incremental Python model: dbt-duckdb writes its incremental batch to a real
      table `<model>__dbt_tmp<timestamp>` (a Python model cannot write a temp table the materialisation
      reads) and never drops it; drop it once the batch is merged. -#}
  {%- if execute -%}
    {%- set res = run_query("select table_name from duckdb_tables() where schema_name = '" ~ this.schema ~ "' and starts_with(table_name, '" ~ this.identifier ~ "__dbt_tmp')") -%}
    {%- for row in res.rows -%}
      {%- do run_query("drop table if exists " ~ api.Relation.create(database=this.database, schema=this.schema, identifier=row[0])) -%}
    {%- endfor -%}
  {%- endif -%}
{%- endmacro %}
