-- One row per pod (cluster, pod UID): team, tenant (attribution precedence), priority tier,
-- workload identity, the checkpointed flag and the GPU models the pod may use.

with specs as (
    select * from {{ ref('int_pod_specs') }}
),

namespaces as (
    select * from {{ ref('int_namespace_attribution') }}
),

final as (
    select
        s.cluster,
        s.pod_uid,
        s.namespace,
        s.pod,
        {{ attributed('s.team_label', 'n.team_ns_label', 'n.team_ns_annotation', 'n.team_seed') }} as team,
        {{ attributed('s.tenant_label', 'n.tenant_ns_label', 'n.tenant_ns_annotation', 'n.tenant_seed') }} as tenant,
        {{ workload_tier('s.namespace', 's.owner_kind', 's.priority_class', 's.app_label', 's.tier_label', 's.batch_label') }} as tier,
        coalesce(s.owner_kind, 'Pod') as workload_kind,
        coalesce(s.owner_name, s.pod) as workload,
        s.checkpointed,
        s.gpu_model_constraint,
        coalesce(n.is_shared, false) as is_shared_namespace
    from specs as s
    left join namespaces as n
        on s.cluster = n.cluster and s.namespace = n.namespace
)

select * from final
