{{ incremental_by(['cluster', 'hour']) }}
{{ config(on_schema_change='append_new_columns') }}
-- Every pod on a node, per hour (CPU-only pods too, with gpu_hours 0, so cost is conserved):
-- GPU-hours allocated / utilised / idle / measured / unmeasured and the pod's cost, attributed.

with costs as (
    select * from {{ ref('int_pod_costs_hourly') }} as src
    {%- if is_incremental() %}
    where {{ incremental_since('src.hour') }}
    {%- endif %}
),

attributes as (
    select * from {{ ref('int_pod_attributes') }}
),

final as (
    select
        c.hour,
        c.cluster,
        c.node,
        c.namespace,
        coalesce(a.team, 'unassigned') as team,
        coalesce(a.tenant, 'unassigned') as tenant,
        coalesce(a.tier, 'batch') as tier,
        coalesce(a.workload_kind, 'Pod') as workload_kind,
        coalesce(a.workload, c.pod) as workload,
        c.pod,
        c.pod_uid,
        c.gpu_model,
        c.gpu_resource,
        c.capacity_type,
        c.gpu_equiv,
        c.covered_hours,
        c.cpu_request,
        c.memory_request_gib,
        c.cpu_usage_cores,
        c.memory_usage_gib,
        c.utilization,
        c.gpu_hours,
        c.utilized_gpu_hours,
        c.idle_gpu_hours,
        c.measured_gpu_hours,
        c.unmeasured_gpu_hours,
        c.gpu_cost_usd,
        c.idle_cost_usd,
        c.cpu_cost_usd,
        c.memory_cost_usd,
        c.gpu_cost_usd + c.cpu_cost_usd + c.memory_cost_usd as total_cost_usd,
        coalesce(a.is_shared_namespace, false) as is_shared_namespace,
        -- the GPU models the pod may use ('|'-separated; null = any), for `gpufinops simulate --cluster`
        a.gpu_model_constraint
    from costs as c
    left join attributes as a
        on c.cluster = a.cluster and c.pod_uid = a.pod_uid
)

select * from final
