{#- Covered time from runs of snapshots (pod and node timelines as change intervals).

    The lake writer keeps, per raw snapshot file, each run of a key's consecutive snapshots per clock
    hour (macros/rollups.sql, the pod and node runs: first / last snapshot time and how many snapshots).
    A run that holds every snapshot the timeline has from its first to its last ("whole") covers, in each
    hour H its last snapshot covers, the running sum of covered seconds over H's snapshot rows
    (int_snapshot_hours.covered_cum_s) at its last snapshot less the sum before its first: the rows of an
    hour are consecutive snapshots and coverage ends later for a later snapshot, so every hour any of the
    run's snapshots covers is one its last covers, and where its first does not reach H neither does any
    snapshot before it (the sum before it is 0). A key-hour (by the clock hour of its snapshots) with a
    run that is not whole (the timeline holds another file's snapshot, or one of the other kind, inside
    it) is summed from its raw snapshot rows, as without runs. Each snapshot row is in exactly one run, so
    the two kinds of contribution add. -#}

{% macro run_hours_ctes(runs, raw, snapshot_hours, keys, carry=[]) -%}
  {#- CTE definitions (to follow `with ...,` in a model) ending in `run_contributions`: per (cluster, hour,
      keys), rows of covered_s, is_first_in_hour, order_ts (the contributing snapshot or run end, to
      order `carry` columns by) and the `carry` columns. `runs`: the runs (cluster, hour, keys, first_ts,
      last_ts, snapshots, carry); `raw`: the raw snapshot rows (cluster, snapshot_ts, keys, carry) already
      filtered like the runs; `snapshot_hours`: int_snapshot_hours. Keys match null-safely. -#}
  {%- set kc = keys + carry -%}
run_snapshots as (
    -- each snapshot's number in its cluster's timeline
    select distinct cluster, snapshot_ts, snapshot_idx from {{ snapshot_hours }}
),

run_checked as (
    select
        r.cluster, r.hour, {% for c in kc %}r.{{ c }}, {% endfor %}r.first_ts, r.last_ts,
        coalesce(r.snapshots = b.snapshot_idx - a.snapshot_idx + 1, false) as whole
    from {{ runs }} as r
    left join run_snapshots as a
        on r.cluster = a.cluster and r.first_ts = a.snapshot_ts
    left join run_snapshots as b
        on r.cluster = b.cluster and r.last_ts = b.snapshot_ts
),

run_partial as (
    -- the key-hours with a run that is not whole
    select distinct cluster, hour{% for c in keys %}, {{ c }}{% endfor %}
    from run_checked
    where not whole
),

run_whole as (
    select c.*
    from run_checked as c
    left join run_partial as p
        on c.cluster = p.cluster and c.hour = p.hour
        {%- for c in keys %} and c.{{ c }} is not distinct from p.{{ c }}{% endfor %}
    where p.cluster is null
),

run_hours as (
    select
        r.cluster,
        hb.hour,
        {% for c in kc %}r.{{ c }},
        {% endfor -%}
        r.last_ts as order_ts,
        hb.covered_cum_s - coalesce(ha.covered_cum_s - ha.covered_s, 0) as covered_s,
        coalesce(ha.is_first_in_hour, false) as is_first_in_hour
    from run_whole as r
    inner join {{ snapshot_hours }} as hb
        on r.cluster = hb.cluster and r.last_ts = hb.snapshot_ts
    left join {{ snapshot_hours }} as ha
        on r.cluster = ha.cluster and r.first_ts = ha.snapshot_ts and hb.hour = ha.hour
),

run_raw_rows as (
    -- the raw snapshot rows of the key-hours above (none where every file holds whole snapshots)
    select s.*
    from {{ raw }} as s
    inner join run_partial as k
        on s.cluster = k.cluster and {{ dbt.date_trunc('hour', 's.snapshot_ts') }} = k.hour
        {%- for c in keys %} and s.{{ c }} is not distinct from k.{{ c }}{% endfor %}
),

run_snapshot_rows as (
    select
        s.cluster,
        h.hour,
        {% for c in kc %}s.{{ c }},
        {% endfor -%}
        s.snapshot_ts as order_ts,
        h.covered_s,
        h.is_first_in_hour
    from run_raw_rows as s
    inner join {{ snapshot_hours }} as h
        on s.cluster = h.cluster and s.snapshot_ts = h.snapshot_ts
),

run_contributions as (
    select * from run_hours
    union all
    select * from run_snapshot_rows
)
{%- endmacro %}
