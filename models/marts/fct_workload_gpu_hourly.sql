{{ incremental_by(['cluster', 'hour']) }}
{{ config(on_schema_change='append_new_columns', post_hook="{{ create_evidence_window_macros() }}") }}
-- depends_on: {{ ref('fct_gpu_device_evidence_hourly') }}
-- Recommender evidence per GPU workload and hour: every workload-hour that held GPUs
-- (fct_gpu_allocation_hourly, gpu_hours > 0: its GPU-hours and cost) with its DCGM evidence summed
-- over its pods and devices (int_workload_gpu_evidence_hourly): samples, mean / p50 / p95 / max
-- utilisation, mean / max framebuffer used and the device framebuffer.
-- An hour without samples has samples = 0 and null utilisation: unmeasured, never 0 %.
-- The merged utilisation histograms stay in int_workload_gpu_evidence_hourly, which the window macro
-- gpu_workload_evidence_window (this model's post-hook, macros/evidence.sql) reads for the mart's
-- workload-hours: copying the 15 M histogram entries of the 1,000-node month into this table was about a
-- third of the model (alone 3.16-3.32 -> 2.14-2.15 CPU-s without them; docs/bench.md).

with allocation as (
    select * from {{ ref('fct_gpu_allocation_hourly') }} as src
    where src.gpu_hours > 0
    {%- if is_incremental() %}
      and {{ incremental_since('src.hour') }}
    {%- endif %}
),

evidence as (
    select * from {{ ref('int_workload_gpu_evidence_hourly') }} as src
    {%- if is_incremental() %}
    where {{ incremental_since('src.hour') }}
    {%- endif %}
),

workload_hours as (
    select
        cluster,
        namespace,
        workload,
        hour,
        {{ arg_max('tier', 'gpu_hours', tie_break=true) }} as tier,
        {{ arg_max('workload_kind', 'gpu_hours', tie_break=true) }} as workload_kind,
        {{ arg_max('gpu_model', 'gpu_hours', tie_break=true) }} as gpu_model,
        {{ arg_max('gpu_resource', 'gpu_hours', tie_break=true) }} as gpu_resource,
        count(distinct pod) as pods,
        max(gpu_equiv) as gpu_equiv_per_pod,
        sum(gpu_hours) as gpu_hours,
        sum(measured_gpu_hours) as measured_gpu_hours,
        sum(gpu_cost_usd) as gpu_cost_usd,
        sum(total_cost_usd) as total_cost_usd
    from allocation
    group by cluster, namespace, workload, hour
),

final as (
    select
        w.cluster,
        w.hour,
        w.namespace,
        w.workload,
        w.tier,
        w.workload_kind,
        w.gpu_model,
        w.gpu_resource,
        w.pods,
        w.gpu_equiv_per_pod,
        w.gpu_hours,
        w.measured_gpu_hours,
        w.gpu_cost_usd,
        w.total_cost_usd,
        coalesce(e.samples, 0) as samples,
        coalesce(e.devices, 0) as devices,
        e.util_mean,
        e.util_p50,
        e.util_p95,
        e.util_max,
        e.fb_used_mean_mib,
        e.fb_used_max_mib,
        e.fb_total_mib
    from workload_hours as w
    left join evidence as e
        on w.cluster = e.cluster and w.namespace = e.namespace and w.workload = e.workload and w.hour = e.hour
)

select * from final
