{#- The formulas of DESIGN §3, each in exactly one place. Models call these; unit tests in the
    models' .yml files pin them. -#}

{% macro sample_utilization(gr_engine_active, gpu_util) -%}
  {#- u of one DCGM sample: GR_ENGINE_ACTIVE (0-1) where present, else GPU_UTIL/100; clamped to [0, 1]. -#}
  greatest(0.0, least(1.0, coalesce(cast({{ gr_engine_active }} as double), cast({{ gpu_util }} as double) / 100.0)))
{%- endmacro %}


{% macro gpu_family(gpu_product, gpu_memory_mib) -%}
  {#- Which MIG profile table applies to a node's GPU (profiles name different memory slices per family). -#}
  case
    when upper({{ gpu_product }}) like '%H200%' then 'H200'
    when upper({{ gpu_product }}) like '%H100%' then 'H100-80GB'
    when upper({{ gpu_product }}) like '%A100%'
         and (upper({{ gpu_product }}) like '%80GB%' or coalesce({{ gpu_memory_mib }}, 0) > 50000) then 'A100-80GB'
    when upper({{ gpu_product }}) like '%A100%' then 'A100-40GB'
    when upper({{ gpu_product }}) like '%A30%' then 'A30'
    else 'unknown'
  end
{%- endmacro %}


{% macro mig_gpu_equiv(mig_count, compute_slices, memory_slices) -%}
  {#- n × max(g/7, memory_slices/8): the larger of the compute and memory share a MIG slice blocks. -#}
  ({{ mig_count }}) * greatest(({{ compute_slices }}) / 7.0, ({{ memory_slices }}) / 8.0)
{%- endmacro %}


{% macro gpu_equiv(gpu_milli, mig_equiv, gpu_count, gpu_shared_count, other_count, replicas) -%}
  {#- GPU-equivalent of a pod: a gpu-milli annotation wins over gpu/gpu.shared counts; whole GPUs
      on a time-sliced node (R > 1 replicas) and gpu.shared requests are n / R; MIG slices come
      in as mig_equiv; other accelerators count 1 per device. -#}
  case
    when {{ gpu_milli }} is not null and {{ gpu_milli }} > 0 then {{ gpu_milli }} / 1000.0
    else coalesce({{ mig_equiv }}, 0)
         + (coalesce({{ gpu_count }}, 0) + coalesce({{ gpu_shared_count }}, 0))
           / greatest(coalesce({{ replicas }}, 1), 1)
         + coalesce({{ other_count }}, 0)
  end
{%- endmacro %}


{% macro gpu_resource(gpu_milli, mig_resource, mig_equiv, gpu_count, gpu_shared_count, other_resource, other_count) -%}
  {#- The resource name that determined a pod's gpu_equiv (same precedence as gpu_equiv). -#}
  case
    when {{ gpu_milli }} is not null and {{ gpu_milli }} > 0 then 'gpu-milli'
    when coalesce({{ mig_equiv }}, 0) > 0 then {{ mig_resource }}
    when coalesce({{ gpu_count }}, 0) > 0 then 'nvidia.com/gpu'
    when coalesce({{ gpu_shared_count }}, 0) > 0 then 'nvidia.com/gpu.shared'
    when coalesce({{ other_count }}, 0) > 0 then {{ other_resource }}
    else 'none'
  end
{%- endmacro %}


{% macro attributed(pod_label, ns_label, ns_annotation, seed_value) -%}
  {#- Attribution precedence: pod label > namespace label > namespace annotation > mapping seed > 'unassigned'. -#}
  coalesce(nullif({{ pod_label }}, ''), nullif({{ ns_label }}, ''), nullif({{ ns_annotation }}, ''),
           nullif({{ seed_value }}, ''), 'unassigned')
{%- endmacro %}


{% macro in_list(expr, values) -%}
  {%- if values | length == 0 -%}false{%- else -%}
  {{ expr }} in ({% for v in values %}'{{ v | replace("'", "''") }}'{{ ", " if not loop.last }}{% endfor %})
  {%- endif -%}
{%- endmacro %}


{% macro workload_tier(namespace, owner_kind, priority_class, app_label, tier_label, batch_label) -%}
  {#- Priority tier, first match wins:
        1. an explicit tier label (var tier_label) with a known value;
        2. system: a shared namespace (var shared_namespaces) or a DaemonSet;
        3. interactive: a Notebook owner or label app=jupyter/notebook;
        4. serving: Deployment/StatefulSet/InferenceService/... owner, or a priority class naming serving/high;
        5. batch: a CronJob, or a Job labelled batch;
        6. training: Job and the training-operator / Ray / Volcano kinds;
        7. anything else (bare pods, unknown owners): batch. -#}
  case
    when lower({{ tier_label }}) in ('system', 'serving', 'training', 'batch', 'interactive') then lower({{ tier_label }})
    when {{ in_list(namespace, var('shared_namespaces')) }} or {{ owner_kind }} = 'DaemonSet' then 'system'
    when {{ owner_kind }} = 'Notebook' or lower({{ app_label }}) in ('jupyter', 'notebook', 'jupyterlab') then 'interactive'
    when {{ owner_kind }} in ('Deployment', 'StatefulSet', 'InferenceService', 'ReplicaSet', 'Rollout',
                             'LeaderWorkerSet', 'RayService', 'ServingRuntime', 'KnativeService', 'Service')
         or lower(coalesce({{ priority_class }}, '')) like '%serving%'
         or lower(coalesce({{ priority_class }}, '')) like '%high%' then 'serving'
    when {{ owner_kind }} = 'CronJob' or ({{ owner_kind }} = 'Job' and lower({{ batch_label }}) = 'batch') then 'batch'
    when {{ owner_kind }} in ('Job', 'PyTorchJob', 'TFJob', 'MPIJob', 'XGBoostJob', 'PaddleJob', 'JAXJob',
                             'TrainJob', 'RayJob', 'RayCluster', 'VolcanoJob', 'JobSet') then 'training'
    else 'batch'
  end
{%- endmacro %}


{% macro node_rate(kind, price, gpu_usd_per_hour, gpus, vcpus, gib) -%}
  {#- Hourly rate of one resource (kind: gpu | cpu | memory) of a node of price p (DESIGN §3 Cost):
        - with a known gpu_usd_per_hour: GPU part = G × that (at most p), the rest split CPU:memory by
          vcpu_weight·C : gib_weight·M;
        - else unit = p / (gpu_weight·G + vcpu_weight·C + gib_weight·M) and each rate is its weight × unit.
      A node with no GPU and no CPU/memory capacity gets rate 0 (its cost stays unallocated). -#}
  {%- set wg, wc, wm = var('gpu_weight'), var('vcpu_weight'), var('gib_weight') -%}
  {%- set p = '(' ~ price ~ ')' -%}
  {%- set g = 'coalesce(' ~ gpus ~ ', 0)' -%}
  {%- set c = 'coalesce(' ~ vcpus ~ ', 0)' -%}
  {%- set m = 'coalesce(' ~ gib ~ ', 0)' -%}
  {%- set gpu_part_known = 'least(' ~ p ~ ', ' ~ g ~ ' * ' ~ gpu_usd_per_hour ~ ')' -%}
  {%- set rest_den = '(' ~ wc ~ ' * ' ~ c ~ ' + ' ~ wm ~ ' * ' ~ m ~ ')' -%}
  {%- set all_den = '(' ~ wg ~ ' * ' ~ g ~ ' + ' ~ wc ~ ' * ' ~ c ~ ' + ' ~ wm ~ ' * ' ~ m ~ ')' -%}
  {%- set w = {'gpu': wg, 'cpu': wc, 'memory': wm}[kind] -%}
  case
    when {{ gpu_usd_per_hour }} is not null and {{ g }} > 0 and {{ rest_den }} > 0 then
      {%- if kind == 'gpu' %} {{ gpu_part_known }} / {{ g }}
      {%- else %} ({{ p }} - {{ gpu_part_known }}) * {{ w }} / {{ rest_den }}{% endif %}
    when {{ all_den }} > 0 then {{ w }} * {{ p }} / {{ all_den }}
    else 0.0
  end
{%- endmacro %}


{% macro provider_of(provider_name) -%}
  {#- A FOCUS ProviderName as the node provider names of k8s_nodes (aws | gcp | azure). -#}
  case
    when lower({{ provider_name }}) like '%amazon%' or lower({{ provider_name }}) like '%aws%' then 'aws'
    when lower({{ provider_name }}) like '%google%' or lower({{ provider_name }}) like '%gcp%' then 'gcp'
    when lower({{ provider_name }}) like '%azure%' or lower({{ provider_name }}) like '%microsoft%' then 'azure'
    else lower(coalesce({{ provider_name }}, 'unknown'))
  end
{%- endmacro %}


{% macro fixed_overhead_rate(cluster) -%}
  {#- Fixed overhead $/h of a cluster (var fixed_overhead_usd_per_hour: per cluster name, '*' for the rest). -#}
  {%- set overhead = var('fixed_overhead_usd_per_hour') -%}
  (case
      when false then cast(0 as double)
      {%- for c, rate in overhead.items() if c != '*' %}
      when {{ cluster }} = '{{ c }}' then cast({{ rate }} as double)
      {%- endfor %}
      else cast({{ overhead.get('*', 0) }} as double) end)
{%- endmacro %}

{# Seconds since the epoch of a timestamp, as a double (used to weigh time overlaps). #}
{% macro epoch_seconds(col) %}{{ return(adapter.dispatch('epoch_seconds')(col)) }}{% endmacro %}
{% macro default__epoch_seconds(col) %}extract(epoch from {{ col }}){% endmacro %}


{% macro idle_pct(idle_gpu_hours, measured_gpu_hours) -%}
  {#- Idle share of a GPU allocation: idle GPU-hours over MEASURED GPU-hours (null without any);
      unmeasured hours count neither way. Published to the warehouse as the SQL macro idle_pct
      (macros/faces.sql) so that the faces apply it to their sums over any window. -#}
  case when {{ measured_gpu_hours }} > 0 then {{ idle_gpu_hours }} / {{ measured_gpu_hours }} end
{%- endmacro %}
