{{ incremental_by(['cluster', 'hour']) }}
{{ config(on_schema_change='append_new_columns') }}
-- Requests and tokens per serving workload and model per hour (the recommender's scale-to-zero
-- evidence reads this grain): the series of int_serving_counters_hourly matched to the pod that ran
-- in that (cluster, hour, namespace, pod) in fct_gpu_allocation_hourly. A series that matches no pod
-- (no pod label, or a pod the warehouse never saw) stays, with workload '(unmatched)' and matched false.
-- Incremental per (cluster, hour), over the same window as int_serving_counters_hourly.

{#- the stand-ins of a series without a namespace or a model label: its output group's, and the test below of
    whether another series of the pod can share them -#}
{%- set no_namespace = "'(none)'" %}
{%- set no_model = "'(unknown)'" %}

with counters as (
    select * from {{ ref('int_serving_counters_hourly') }} as src
    {%- if is_incremental() %}
    where {{ incremental_since('src.hour', late_table='serving_requests') }}
    {%- endif %}
),

serving_namespaces as (
    select distinct cluster, namespace from counters
),

pods as (
    -- only the pod-hours of namespaces that serve: the join below matches no other
    select
        a.cluster, a.hour, a.namespace, a.pod,
        max(a.workload_kind) as workload_kind,
        max(a.workload) as workload,
        max(a.team) as team,
        max(a.tenant) as tenant,
        max(a.tier) as tier
    from {{ ref('fct_gpu_allocation_hourly') }} as a
    inner join serving_namespaces as n
        on a.cluster = n.cluster and a.namespace = n.namespace
    {%- if is_incremental() %}
    where {{ incremental_since('a.hour', cluster='a.cluster', late_table='serving_requests') }}
    {%- endif %}
    group by 1, 2, 3, 4
),

series_hours as {{ not_materialized() }} (
    -- every series-hour (one row of the counters per cluster, hour, namespace, pod and model) with its
    -- pod's attributes and its output group's labels
    select
        c.hour,
        c.cluster,
        coalesce(c.namespace, {{ no_namespace }}) as namespace,
        coalesce(p.workload_kind, '(unmatched)') as workload_kind,
        coalesce(p.workload, '(unmatched)') as workload,
        coalesce(c.model, {{ no_model }}) as model,
        coalesce(p.team, 'unassigned') as team,
        coalesce(p.tenant, 'unassigned') as tenant,
        p.tier,
        p.workload is not null as matched,
        c.pod,
        c.requests,
        c.prompt_tokens,
        c.generation_tokens,
        -- its labels are its own: no other series-hour of the pod gets them. Only a series whose namespace or
        -- model is the stand-in (null, or spelled like it) can share it with another series of the pod
        coalesce(c.namespace, {{ no_namespace }}) <> {{ no_namespace }} and coalesce(c.model, {{ no_model }}) <> {{ no_model }} as own_labels
    from counters as c
    left join pods as p
        on c.cluster = p.cluster and c.hour = p.hour and c.namespace = p.namespace and c.pod = p.pod
),

per_pod as (
    -- one row per output group and pod, so that the pods are counted off these rows (a
    -- count(distinct pod) over every series would be a second grouping of all of them). A series-hour
    -- with its own labels is its pod's only row in its group as it is: no GROUP BY over those (alone at
    -- 1,000 nodes, docs/bench.md, thirty-first session)
    select hour, cluster, namespace, workload_kind, workload, model, team, tenant, tier, matched, pod,
           requests, prompt_tokens, generation_tokens
    from series_hours
    where own_labels
    union all
    select hour, cluster, namespace, workload_kind, workload, model, team, tenant, tier, matched, pod,
           sum(requests) as requests,
           sum(prompt_tokens) as prompt_tokens,
           sum(generation_tokens) as generation_tokens
    from series_hours
    where not own_labels
    group by 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11
),

final as (
    select
        hour, cluster, namespace, workload_kind, workload, model, team, tenant, tier, matched,
        count(pod) as pods,
        sum(requests) as requests,
        sum(prompt_tokens) as prompt_tokens,
        sum(generation_tokens) as generation_tokens,
        coalesce(sum(prompt_tokens), 0) + coalesce(sum(generation_tokens), 0) as tokens
    from per_pod
    group by 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
)

select * from final
