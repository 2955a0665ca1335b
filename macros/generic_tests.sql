{#- Generic data tests (dbt_utils is not available offline). Each returns the failing rows. -#}

{% test unique_combination(model, columns) %}
  select {{ columns | join(', ') }}, count(*) as n
  from {{ model }}
  group by {{ columns | join(', ') }}
  having count(*) > 1
{% endtest %}


{% test expression_is_true(model, expression, where=none) %}
  select *
  from {{ model }}
  where not coalesce(({{ expression }}), false)
  {%- if where %} and ({{ where }}){% endif %}
{% endtest %}


{% test not_negative(model, column_name, tolerance=1e-9) %}
  select * from {{ model }} where {{ column_name }} < -{{ tolerance }}
{% endtest %}


{% test not_null_columns(model, columns) %}
  {#- One query for a model's not-null columns (one dbt test node instead of one per column): the
      rows where any of `columns` is null. -#}
  select * from {{ model }}
  where {% for c in columns %}{{ c }} is null{% if not loop.last %} or {% endif %}{% endfor %}
{% endtest %}
