{{ incremental_by(['cluster', 'hour']) }}
-- depends_on: {{ ref('stg_k8s__pods') }}
-- depends_on: {{ ref('stg_k8s__pod_runs') }}
-- One row per pod per node per hour it was seen (node null while Pending and unscheduled):
-- covered hours (exact, from the snapshot timeline). Terminated pods (Succeeded/Failed) hold no
-- resources and are left out.
-- Read from the pod-presence rollup (macros/rollups.sql, the pod runs: per pod, clock hour and raw
-- file, each run of consecutive snapshots), not from every snapshot row: covered seconds per hour from
-- the timeline's running sums (macros/runs.sql); a pod-hour with a run the timeline holds other
-- snapshots inside (another file's, a node-only snapshot) is summed from its raw snapshot rows.
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

raw_pods as (
    -- the raw snapshot rows, read only for a pod-hour with a run that is not whole (macros/runs.sql)
    select src.cluster, src.snapshot_ts, src.namespace, src.pod, src.pod_uid, src.node, src.phase
    from {{ landing_input('stg_k8s__pods', 'k8s_pods') }} as src
    where {{ pod_holds_resources('src.phase') }}
),

{{ run_hours_ctes('runs', 'raw_pods', 'snapshot_hours', ['namespace', 'pod', 'pod_uid', 'node'], ['phase']) }},

final as (
    select
        c.cluster,
        c.hour,
        c.namespace,
        c.pod,
        c.pod_uid,
        c.node,
        {{ arg_max('c.phase', 'c.order_ts') }} as phase,
        sum(c.covered_s) / 3600.0 as covered_hours,
        bool_or(c.is_first_in_hour) as in_first_snapshot
    from run_contributions as c
    {%- if is_incremental() %}
    where {{ incremental_since('c.hour', 'hour', 'c.cluster') }}
    {%- endif %}
    group by c.cluster, c.hour, c.namespace, c.pod, c.pod_uid, c.node
)

select * from final
