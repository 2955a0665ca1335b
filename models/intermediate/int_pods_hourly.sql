{{ incremental_by(['cluster', 'hour']) }}
-- depends_on: {{ ref('stg_k8s__pods') }}
-- depends_on: {{ ref('stg_k8s__pod_runs') }}
-- One row per pod per node per hour it was seen (node null while Pending and unscheduled):
-- covered hours (exact, from the snapshot timeline). Terminated pods (Succeeded/Failed) hold no
-- resources and are left out.
-- Read from the pod-presence rollup (macros/rollups.sql, the pod runs: per pod, clock hour and
-- raw file, each run of consecutive snapshots), not from every snapshot row: a run that is the
-- timeline's snapshots from its first to its last (its snapshot count says so) covers, in each hour,
-- the running sum of covered seconds at its last snapshot less the sum before its first
-- (int_snapshot_hours.covered_cum_s). A pod-hour with a run the timeline holds other snapshots inside
-- (another file's, a node-only snapshot) is summed from its raw snapshot rows instead, as before.
{%- set cap_h = var('snapshot_interval_s') * var('coverage_cap_factor') / 3600 %}

with runs as (
    select src.cluster, src.hour, src.namespace, src.pod, src.pod_uid, src.node, src.first_ts, src.last_ts,
           src.snapshots, src.phase
    from {{ landing_input('stg_k8s__pod_runs', 'k8s_pod_runs') }} as src
    {%- if is_incremental() %}
    -- a run's snapshots cover up to the cap past its clock hour
    where {{ incremental_since('src.hour', 'hour', minus_hours=cap_h + 1) }}
    {%- endif %}
),

snapshot_hours as (
    select * from {{ ref('int_snapshot_hours') }}
),

snapshots as (
    -- each snapshot's number in its cluster's timeline
    select distinct cluster, snapshot_ts, snapshot_idx from snapshot_hours
),

checked as (
    -- whole: the run holds every snapshot of the timeline from its first to its last
    select
        r.*,
        coalesce(r.snapshots = b.snapshot_idx - a.snapshot_idx + 1, false) as whole
    from runs as r
    left join snapshots as a
        on r.cluster = a.cluster and r.first_ts = a.snapshot_ts
    left join snapshots as b
        on r.cluster = b.cluster and r.last_ts = b.snapshot_ts
),

partial as (
    -- the pod-hours (by the clock hour of their snapshots) with a run that is not whole
    select distinct cluster, hour, namespace, pod, pod_uid, node
    from checked
    where not whole
),

whole_runs as (
    select c.*
    from checked as c
    left join partial as p
        on c.cluster = p.cluster and c.hour = p.hour and c.namespace = p.namespace and c.pod = p.pod
        and c.pod_uid = p.pod_uid and c.node is not distinct from p.node
    where p.cluster is null
),

run_hours as (
    -- a whole run's seconds in each hour its last snapshot covers (every hour any of its snapshots
    -- covers: coverage ends later for a later snapshot); before its first snapshot, the hour's running
    -- sum is 0 where that snapshot does not reach the hour
    select
        r.cluster,
        hb.hour,
        r.namespace,
        r.pod,
        r.pod_uid,
        r.node,
        r.phase,
        r.last_ts as phase_ts,
        hb.covered_cum_s - coalesce(ha.covered_cum_s - ha.covered_s, 0) as covered_s,
        coalesce(ha.is_first_in_hour, false) as is_first_in_hour
    from whole_runs as r
    inner join snapshot_hours as hb
        on r.cluster = hb.cluster and r.last_ts = hb.snapshot_ts
    left join snapshot_hours as ha
        on r.cluster = ha.cluster and r.first_ts = ha.snapshot_ts and hb.hour = ha.hour
),

raw_partial as (
    -- the raw snapshot rows of the pod-hours above (none in a fleet whose files hold whole snapshots)
    select src.cluster, src.snapshot_ts, src.namespace, src.pod, src.pod_uid, src.node, src.phase
    from {{ landing_input('stg_k8s__pods', 'k8s_pods') }} as src
    inner join partial as k
        on src.cluster = k.cluster and {{ dbt.date_trunc('hour', 'src.snapshot_ts') }} = k.hour
        and src.namespace = k.namespace and src.pod = k.pod and src.pod_uid = k.pod_uid
        and src.node is not distinct from k.node
    where {{ pod_holds_resources('src.phase') }}
),

snapshot_rows as (
    select
        p.cluster,
        h.hour,
        p.namespace,
        p.pod,
        p.pod_uid,
        p.node,
        p.phase,
        p.snapshot_ts as phase_ts,
        h.covered_s,
        h.is_first_in_hour
    from raw_partial as p
    inner join snapshot_hours as h
        on p.cluster = h.cluster and p.snapshot_ts = h.snapshot_ts
),

contributions as (
    select * from run_hours
    union all
    select * from snapshot_rows
),

final as (
    select
        c.cluster,
        c.hour,
        c.namespace,
        c.pod,
        c.pod_uid,
        c.node,
        {{ arg_max('c.phase', 'c.phase_ts') }} as phase,
        sum(c.covered_s) / 3600.0 as covered_hours,
        bool_or(c.is_first_in_hour) as in_first_snapshot
    from contributions as c
    {%- if is_incremental() %}
    where {{ incremental_since('c.hour', 'hour', 'c.cluster') }}
    {%- endif %}
    group by c.cluster, c.hour, c.namespace, c.pod, c.pod_uid, c.node
)

select * from final
