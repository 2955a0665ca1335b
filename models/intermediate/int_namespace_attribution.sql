{{ config(materialized='table') }}
-- depends_on: {{ ref('namespace_teams') }}
-- (optional_seed reads the seed by name, not by ref: without this line dbt may build the model before
-- the seed is loaded, and a full build in another order read no mapping)
-- One row per (cluster, namespace): the namespace-level attribution sources, in precedence order
-- after the pod label: namespace label, namespace annotation, the namespace_teams mapping seed.
-- Namespaces seen only on pods (no namespace object ingested) still get a row.

with namespaces as (
    select * from {{ ref('stg_k8s__namespaces') }}
),

latest as (
    select
        cluster,
        namespace,
        {{ arg_max('labels', 'snapshot_ts') }} as labels,
        {{ arg_max('annotations', 'snapshot_ts') }} as annotations
    from namespaces
    group by cluster, namespace
),

pod_namespaces as (
    select distinct cluster, namespace from {{ ref('int_pod_specs') }}
),

all_namespaces as (
    select cluster, namespace from latest
    union
    select cluster, namespace from pod_namespaces
),

seed as (
    select namespace, max(team) as team, max(tenant) as tenant
    from {{ optional_seed('namespace_teams', ['namespace', 'team', 'tenant']) }} as s
    group by namespace
),

final as (
    select
        a.cluster,
        a.namespace,
        l.labels['{{ var("team_label") }}'] as team_ns_label,
        l.labels['{{ var("tenant_label") }}'] as tenant_ns_label,
        l.annotations['{{ var("team_label") }}'] as team_ns_annotation,
        l.annotations['{{ var("tenant_label") }}'] as tenant_ns_annotation,
        s.team as team_seed,
        s.tenant as tenant_seed,
        {{ in_list('a.namespace', var('shared_namespaces')) }} as is_shared
    from all_namespaces as a
    left join latest as l
        on a.cluster = l.cluster and a.namespace = l.namespace
    left join seed as s
        on a.namespace = s.namespace
)

select * from final
