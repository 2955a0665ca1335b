{#- Generic data tests (dbt_utils is not available offline). Each returns the failing rows. -#}

{% test unique_combination(model, columns) %}
  {#- The rows whose key repeats. Grouping every row by one 64-bit hash of the key is 2-2.5x cheaper
      than by the key's columns (mostly strings); only the rows of a repeated hash, which a repeated key
      always has, are then grouped by the columns themselves, so a hash collision is never a failure. -#}
  with repeated_hashes as (
    select {{ key_hash(columns) }} as key_hash
    from {{ model }}
    group by {{ key_hash(columns) }}
    having count(*) > 1
  )
  select {{ columns | join(', ') }}, count(*) as n
  from {{ model }}
  where {{ key_hash(columns) }} in (select key_hash from repeated_hashes)
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
