{{ incremental_by(['cluster', 'pod_uid']) }}
{{ config(on_schema_change='append_new_columns') }}
-- depends_on: {{ ref('stg_k8s__pods_last') }}
-- One row per pod (cluster, pod UID): its spec as of its last snapshot, with the effective
-- resource requests Kubernetes schedules on (per resource: max(Σ app containers, max init
-- container); a container's request defaults to its limit) and the labels/annotations the
-- attribution, tier and GPU-equivalent formulas read. A pod's requests are immutable in practice,
-- so this is computed once per pod instead of once per snapshot. It reads the lake's k8s_pods_last
-- rollup (each pod's last-snapshot rows per raw file, written at landing: ingest/rollups.py), not
-- every snapshot: a pod's last snapshot is the last of its files' last snapshots.

with pods as {{ not_materialized() }} (
    select * from {{ landing_input('stg_k8s__pods_last', 'k8s_pods_last', 'last_seen') }} as src
    {%- if is_incremental() %}
    where {{ incremental_since('src.snapshot_ts', 'last_seen') }}
    {%- endif %}
),

last_snapshot as (
    select cluster, pod_uid, max(snapshot_ts) as last_seen
    from pods
    group by cluster, pod_uid
),

latest as (
    -- the pod's row at its last snapshot, found by a lean GROUP BY and a join: an arg_max over
    -- the nested columns of every snapshot costs ten times more
    select
        p.cluster,
        p.pod_uid,
        p.namespace,
        p.pod,
        p.qos_class,
        p.priority,
        p.priority_class,
        p.owner_kind,
        p.owner_name,
        p.labels,
        p.annotations,
        p.containers,
        p.init_containers,
        p.node_selector,
        p.required_node_affinity,
        l.last_seen,
        row_number() over (partition by p.cluster, p.pod_uid order by p.namespace, p.pod) as row_in_pod
    from pods as p
    inner join last_snapshot as l
        on p.cluster = l.cluster and p.pod_uid = l.pod_uid and p.snapshot_ts = l.last_seen
),

containers_flat as (
    select cluster, pod_uid, false as is_init, {{ explode_list('containers') }} as c from latest where row_in_pod = 1
    union all
    select cluster, pod_uid, true as is_init, {{ explode_list('init_containers') }} as c from latest where row_in_pod = 1
),

entries as (
    select
        cluster,
        pod_uid,
        is_init,
        -- requests win over limits; a resource with only a limit is requested at the limit
        {{ explode_merged_map('c.limits', 'c.requests') }} as entry
    from containers_flat
),

effective as (
    select
        cluster,
        pod_uid,
        entry.key as resource,
        greatest(
            coalesce(sum(case when not is_init then entry.value end), 0),
            coalesce(max(case when is_init then entry.value end), 0)
        ) as qty
    from entries
    group by cluster, pod_uid, entry.key
),

request_map as (
    -- every effective request under its verbatim resource name (the packer's constraints)
    select cluster, pod_uid, map_from_entries({{ struct_list([['k', 'resource'], ['v', 'qty']]) }}) as requests
    from effective
    group by cluster, pod_uid
),

container_resources as (
    -- per app container: CPU / memory request (a request defaults to its limit) and memory limit
    select
        cluster,
        pod_uid,
        {{ struct_list([['name', 'c.name'],
                        ['cpu_request', "coalesce(c.requests['cpu'], c.limits['cpu'])"],
                        ['memory_request', "coalesce(c.requests['memory'], c.limits['memory'])"],
                        ['memory_limit', "c.limits['memory']"]]) }} as container_resources
    from containers_flat
    where not is_init
    group by cluster, pod_uid
),

resources as (
    select
        cluster,
        pod_uid,
        sum(case when resource = 'cpu' then qty else 0 end) as cpu_request,
        sum(case when resource = 'memory' then qty else 0 end) as memory_request_bytes,
        sum(case when resource = 'nvidia.com/gpu' then qty else 0 end) as gpu_count_request,
        sum(case when resource = 'nvidia.com/gpu.shared' then qty else 0 end) as gpu_shared_request,
        {{ arg_max("case when resource like 'nvidia.com/mig-%' then resource end", "case when resource like 'nvidia.com/mig-%' then qty end") }} as mig_resource,
        max(case when resource like 'nvidia.com/mig-%' then qty end) as mig_count_request,
        {%- set is_other = in_list('resource', var('other_accelerator_resources')) %}
        {{ arg_max('case when ' ~ is_other ~ ' then resource end', 'case when ' ~ is_other ~ ' then qty end') }} as other_accelerator_resource,
        sum(case when {{ in_list('resource', var('other_accelerator_resources')) }} then qty else 0 end) as other_accelerator_request
    from effective
    group by cluster, pod_uid
),

affinity_exprs as (
    -- the match expressions of the pod's required node affinity (term index, key, operator, values)
    select cluster, pod_uid, {{ explode_list('required_node_affinity') }} as e
    from latest
    where row_in_pod = 1
),

affinity_flat as (
    select cluster, pod_uid, e.term as term, e.key as label_key, e.operator as op, e.label_values as label_values
    from affinity_exprs
),

affinity_terms as (
    -- per term: how many `In` expressions it has on the GPU product label
    select
        cluster,
        pod_uid,
        term,
        sum(case when label_key = 'nvidia.com/gpu.product' and op = 'In' then 1 else 0 end) as product_in_exprs
    from affinity_flat
    group by cluster, pod_uid, term
),

affinity_pods as (
    -- terms are ORed: the products are constrained only when every term constrains them
    select cluster, pod_uid
    from affinity_terms
    group by cluster, pod_uid
    having min(product_in_exprs) > 0
),

product_values as (
    select cluster, pod_uid, term, {{ explode_list('label_values') }} as product
    from affinity_flat
    where label_key = 'nvidia.com/gpu.product' and op = 'In'
),

term_products as (
    -- a term's expressions are ANDed: a product the term allows is in every one of its In lists
    select distinct v.cluster, v.pod_uid, v.product
    from product_values as v
    inner join affinity_terms as t
        on v.cluster = t.cluster and v.pod_uid = t.pod_uid and v.term = t.term
    group by v.cluster, v.pod_uid, v.term, v.product, t.product_in_exprs
    having count(*) = t.product_in_exprs
),

gpu_affinity as (
    -- the union over the terms, '|'-separated and sorted (the FGD authors' `A|B` form)
    select tp.cluster, tp.pod_uid, {{ sorted_string_agg('tp.product', '|') }} as gpu_products
    from term_products as tp
    inner join affinity_pods as ap
        on tp.cluster = ap.cluster and tp.pod_uid = ap.pod_uid
    group by tp.cluster, tp.pod_uid
),

final as (
    select
        l.cluster,
        l.pod_uid,
        l.namespace,
        l.pod,
        l.qos_class,
        l.priority,
        l.priority_class,
        l.owner_kind,
        l.owner_name,
        l.labels['{{ var("team_label") }}'] as team_label,
        l.labels['{{ var("tenant_label") }}'] as tenant_label,
        coalesce(l.labels['app'], l.labels['app.kubernetes.io/name']) as app_label,
        l.labels['{{ var("tier_label") }}'] as tier_label,
        coalesce(l.labels['workload-type'], l.labels['job-type'], l.labels['tier']) as batch_label,
        {{ safe_cast("l.annotations['" ~ var('gpu_milli_annotation') ~ "']", 'double') }} as gpu_milli,
        coalesce(lower(l.annotations['{{ var("checkpointed_annotation") }}']) in ('true', '1', 'yes'), false) as checkpointed,
        coalesce(r.cpu_request, 0) as cpu_request,
        coalesce(r.memory_request_bytes, 0) as memory_request_bytes,
        coalesce(r.gpu_count_request, 0) as gpu_count_request,
        coalesce(r.gpu_shared_request, 0) as gpu_shared_request,
        r.mig_resource,
        regexp_extract(r.mig_resource, 'nvidia[.]com/mig-(.*)$', 1) as mig_profile,
        coalesce(r.mig_count_request, 0) as mig_count_request,
        r.other_accelerator_resource,
        coalesce(r.other_accelerator_request, 0) as other_accelerator_request,
        -- the GPU models the pod may use, for fragmentation task shapes (models/README.md): a
        -- nodeSelector on the GFD product label, else a required node-affinity In list on it
        coalesce(l.node_selector['nvidia.com/gpu.product'], ga.gpu_products) as gpu_model_constraint,
        coalesce(rm.requests, {{ empty_map('string', 'double') }}) as requests,
        cr.container_resources,
        l.last_seen
    from latest as l
    left join resources as r
        on l.cluster = r.cluster and l.pod_uid = r.pod_uid
    left join request_map as rm
        on l.cluster = rm.cluster and l.pod_uid = rm.pod_uid
    left join container_resources as cr
        on l.cluster = cr.cluster and l.pod_uid = cr.pod_uid
    left join gpu_affinity as ga
        on l.cluster = ga.cluster and l.pod_uid = ga.pod_uid
    where l.row_in_pod = 1
)

select * from final
