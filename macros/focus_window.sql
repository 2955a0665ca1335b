{% macro focus_window(column) -%}
  {#- The days an incremental build of fct_focus_allocation_daily rebuilds, as a filter on `column`
      (a date), or 'true' (every day: a full refresh, a lake cluster with no rows in the target yet, or
      unit tests with prune_partitions off). The model replaces whole days (delete+insert on `day`),
      so the window is one for all clusters:
        - the days from the earliest cluster cutoff: each cluster's newest day in the target minus the
          lookback, truncated to its day (int_node_days and int_workload_node_daily rebuild the same
          days per cluster; older days of theirs did not change), and
        - every older day whose bill changed since the target was built: a day of a bill line
          (int_bill_lines: day, row_hash) that the target does not hold as an origin charge, or of
          an origin charge the bill no longer holds (a corrected bill). A bill can land for any day.
      The values are read once and inlined as constants, so the scans below can prune. -#}
  {%- if not (is_incremental() and var('prune_partitions') and execute) -%}{{ return('true') }}{%- endif -%}
  {%- set dt = modules.datetime -%}
  {%- set newest = {} -%}
  {%- for row in run_query("select cluster, cast(max(day) as string) from " ~ this ~ " where cluster is not null group by cluster").rows -%}
    {%- do newest.update({row[0]: row[1]}) -%}
  {%- endfor -%}
  {%- if not every_lake_cluster_in(newest) -%}
    {{ return('true') }}
  {%- endif -%}
  {%- set lookback = dt.timedelta(hours=var('incremental_lookback_hours')) -%}
  {%- set start = (newest.values() | min) -%}
  {%- set start = (dt.datetime.fromisoformat(start[:10]) - lookback).date().isoformat() -%}
  {%- set changed -%}
    select distinct cast(day as string) from (
        (select day, row_hash as charge_id from {{ ref('int_bill_lines') }}
         except
         select day, origin_charge_id from {{ this }} where charge_origin = 'bill')
        union all
        (select day, origin_charge_id from {{ this }} where charge_origin = 'bill'
         except
         select day, row_hash from {{ ref('int_bill_lines') }})
    ) as d
    where day < cast('{{ start }}' as date)
    order by 1
  {%- endset -%}
  {%- set days = run_query(changed).columns[0].values() | list -%}
  {%- set cond = column ~ " >= cast('" ~ start ~ "' as date)" -%}
  {%- if days | length > 0 -%}
    {%- set listed = [] -%}
    {%- for d in days -%}{%- do listed.append("cast('" ~ d ~ "' as date)") -%}{%- endfor -%}
    {%- set cond = "(" ~ cond ~ " or " ~ column ~ " in (" ~ listed | join(', ') ~ "))" -%}
  {%- endif -%}
  {{ return(cond) }}
{%- endmacro %}
