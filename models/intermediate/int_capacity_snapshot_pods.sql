{{ incremental_by(['cluster', 'hour']) }}
-- Pods bound to a node in the first snapshot of each hour: their task shape (CPU, GPU-equivalent,
-- whole vs fractional) for fragmentation and bin-packing. A table (incremental per cluster-hour, the
-- window of the capacity mart built beside it), not a view: the capacity model reads it three ways
-- (per node, the split GPU pods, the counted shapes) and each read of a view evaluated the pod
-- allocation chain again.
with allocation as (
    select * from {{ ref('int_pod_allocation_hourly') }} as src
    where in_first_snapshot
    {%- if is_incremental() %}
    and {{ incremental_since('src.hour') }}
    {%- endif %}
),

attributes as (
    select cluster, pod_uid, tier from {{ ref('int_pod_attributes') }}
),

specs as (
    select cluster, pod_uid, gpu_model_constraint from {{ ref('int_pod_specs') }}
),

final as (
    select
        a.cluster,
        a.hour,
        a.node,
        a.pod_uid,
        a.cpu_request,
        a.memory_request_gib,
        a.gpu_equiv,
        a.gpu_resource,
        -- whole devices: plain nvidia.com/gpu (not time-sliced) and other accelerators
        coalesce(a.gpu_resource in ('nvidia.com/gpu', 'amd.com/gpu', 'aws.amazon.com/neuron', 'habana.ai/gaudi', 'intel.com/gpu')
            and a.gpu_equiv >= 1 and a.gpu_equiv = floor(a.gpu_equiv), false) as is_whole,
        coalesce(t.tier, 'batch') = 'system' as is_system,
        s.gpu_model_constraint
    from allocation as a
    left join attributes as t
        on a.cluster = t.cluster and a.pod_uid = t.pod_uid
    left join specs as s
        on a.cluster = s.cluster and a.pod_uid = s.pod_uid
)

select * from final
