{#- SQL macros every build publishes into the warehouse for the faces (API, dashboards, reports):
    they compute a formula of macros/formulas.sql over the faces' own sums, so that the formula
    stays in one place. Run as an on-run-end hook (dbt_project.yml). -#}

{% macro publish_face_macros() -%}
  {#- DuckDB SQL macros; on Spark none (the serving DuckDB file gets them: macro publish_serving_macros) -#}
  {{ return(adapter.dispatch('publish_face_macros', 'gpufinops')()) }}
{%- endmacro %}

{% macro default__publish_face_macros() -%}select 1{%- endmacro %}

{% macro duckdb__publish_face_macros() -%}
  create or replace macro idle_pct(idle_gpu_hours, measured_gpu_hours) as
    {{ idle_pct('idle_gpu_hours', 'measured_gpu_hours') }}
{%- endmacro %}


{% macro publish_serving_macros() -%}
  {#- run-operation on the DuckDB file of views over Spark-built marts (transform.runner): the SQL
      macros a DuckDB build publishes (faces, recommender evidence windows), over the views -#}
  {%- do run_query(duckdb__publish_face_macros()) -%}
  {%- set wl = api.Relation.create(database=target.database, schema=target.schema, identifier='fct_workload_gpu_hourly') -%}
  {%- do run_query(duckdb__create_evidence_window_macros(wl)) -%}
{%- endmacro %}
