{#- SQL macros every build publishes into the warehouse for the faces (API, dashboards, reports):
    they compute a formula of macros/formulas.sql over the faces' own sums, so that the formula
    stays in one place. Run as an on-run-end hook (dbt_project.yml). -#}

{% macro publish_face_macros() -%}
  create or replace macro idle_pct(idle_gpu_hours, measured_gpu_hours) as
    {{ idle_pct('idle_gpu_hours', 'measured_gpu_hours') }}
{%- endmacro %}
