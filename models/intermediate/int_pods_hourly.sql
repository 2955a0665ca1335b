{{ incremental_by(['cluster', 'hour']) }}
-- depends_on: {{ ref('stg_k8s__pods') }}
-- One row per pod per node per hour it was seen (node null while Pending and unscheduled):
-- covered hours (exact, from the snapshot timeline). Terminated pods (Succeeded/Failed) hold no
-- resources and are left out.
{%- set cap_h = var('snapshot_interval_s') * var('coverage_cap_factor') / 3600 %}

with pods as (
    select cluster, snapshot_ts, namespace, pod, pod_uid, node, phase
    from {{ landing_input('stg_k8s__pods', 'k8s_pods') }} as src
    where coalesce(src.phase, 'Unknown') not in ('Succeeded', 'Failed')
    {%- if is_incremental() %}
      and {{ incremental_since('src.snapshot_ts', 'hour', minus_hours=cap_h) }}
    {%- endif %}
),

snapshot_hours as (
    select * from {{ ref('int_snapshot_hours') }}
),

joined as (
    select
        p.*,
        h.hour,
        h.covered_s,
        h.is_first_in_hour
    from pods as p
    inner join snapshot_hours as h
        on p.cluster = h.cluster and p.snapshot_ts = h.snapshot_ts
    {%- if is_incremental() %}
    where {{ incremental_since('h.hour', 'hour', 'h.cluster') }}
    {%- endif %}
),

final as (
    select
        cluster,
        hour,
        namespace,
        pod,
        pod_uid,
        node,
        {{ arg_max('phase', 'snapshot_ts') }} as phase,
        sum(covered_s) / 3600.0 as covered_hours,
        bool_or(is_first_in_hour) as in_first_snapshot
    from joined
    group by cluster, hour, namespace, pod, pod_uid, node
)

select * from final
