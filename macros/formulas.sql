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


{% macro mig_layout_slices(mig_config, profile_compute_slices, max_instances, family_balanced_slices) -%}
  {#- Compute slices per GPU of the layout a node's `nvidia.com/mig.config` label names: NVIDIA's
      `all-<profile>` = max_instances × g of that profile; `all-balanced` = Σ balanced_instances × g of
      the GPU family (both from seeds/mig_profiles.csv); any other (custom) name: null (unknown). -#}
  case
    when {{ mig_config }} = 'all-balanced' then {{ family_balanced_slices }}
    when {{ mig_config }} like 'all-%' then ({{ max_instances }}) * ({{ profile_compute_slices }})
  end
{%- endmacro %}


{% macro mig_gpu_equiv(mig_count, compute_slices, layout_slices) -%}
  {#- GPU-equivalent of n MIG instances of g compute slices on a GPU whose layout holds S compute
      slices in all (S from the DCGM GPU-instance series or the mig.config label; 7 when unknown):
      n × g / S. Every instance of a layout together is exactly 1 GPU; instances no pod holds stay
      unallocated. S is never below g (one instance is at most one GPU). -#}
  ({{ mig_count }}) * ({{ compute_slices }})
    / greatest(coalesce(nullif({{ layout_slices }}, 0), 7.0), ({{ compute_slices }}))
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


{% macro residual_gpu_share(base_price, gpus, vcpus, gib, r_cpu, r_mem) -%}
  {#- Residual method (models/README.md): the GPUs' share of a node's price =
        1 − (C × r_cpu + M × r_mem) / base,
      base = the instance type's on-demand list price (else the node's own price), r_cpu / r_mem the
      provider's general-purpose $ per vCPU-hour and GiB-hour (seeds/reference_rates.csv). A node
      without GPUs: 0; with GPUs but no CPU/memory capacity: 1; null without rates or a base price. -#}
  {%- set g = 'coalesce(' ~ gpus ~ ', 0)' -%}
  {%- set ref = '(coalesce(' ~ vcpus ~ ', 0) * ' ~ r_cpu ~ ' + coalesce(' ~ gib ~ ', 0) * ' ~ r_mem ~ ')' -%}
  case
    when {{ r_cpu }} is null or {{ r_mem }} is null then null
    when {{ g }} <= 0 then 0.0
    when coalesce({{ base_price }}, 0) <= 0 then null
    when {{ ref }} <= 0 then 1.0
    else 1.0 - {{ ref }} / ({{ base_price }})
  end
{%- endmacro %}


{% macro node_rate(kind, price, gpu_usd_per_hour, gpus, vcpus, gib, split, gpu_share, r_cpu, r_mem) -%}
  {#- Hourly rate of one resource (kind: gpu | cpu | memory) of a node of price p (models/README.md
      "Price split"); `split` is the row's method:
        - gpu_price (a known gpu_usd_per_hour): GPU part = G × that (at most p); the rest split
          CPU:memory by the reference rates C·r_cpu : M·r_mem when present, else vcpu_weight·C : gib_weight·M;
        - residual: GPU part = p × gpu_share (residual_gpu_share), the rest split C·r_cpu : M·r_mem;
        - weights: unit = p / (gpu_weight·G + vcpu_weight·C + gib_weight·M), each rate its weight × unit.
      So the GPU, CPU and memory parts always add up to p. A node with no GPU and no CPU/memory
      capacity gets rate 0 (its cost stays unallocated). -#}
  {%- set wg, wc, wm = var('gpu_weight'), var('vcpu_weight'), var('gib_weight') -%}
  {%- set p = '(' ~ price ~ ')' -%}
  {%- set g = 'coalesce(' ~ gpus ~ ', 0)' -%}
  {%- set c = 'coalesce(' ~ vcpus ~ ', 0)' -%}
  {%- set m = 'coalesce(' ~ gib ~ ', 0)' -%}
  {%- set gpu_part_known = 'least(' ~ p ~ ', ' ~ g ~ ' * ' ~ gpu_usd_per_hour ~ ')' -%}
  {%- set rest_den = '(' ~ wc ~ ' * ' ~ c ~ ' + ' ~ wm ~ ' * ' ~ m ~ ')' -%}
  {%- set ref_den = '(' ~ c ~ ' * ' ~ r_cpu ~ ' + ' ~ m ~ ' * ' ~ r_mem ~ ')' -%}
  {%- set all_den = '(' ~ wg ~ ' * ' ~ g ~ ' + ' ~ wc ~ ' * ' ~ c ~ ' + ' ~ wm ~ ' * ' ~ m ~ ')' -%}
  {%- set w = {'gpu': wg, 'cpu': wc, 'memory': wm}[kind] -%}
  {%- set r = {'gpu': none, 'cpu': r_cpu, 'memory': r_mem}[kind] -%}
  case
    when {{ split }} = 'gpu_price' then
      {%- if kind == 'gpu' %} {{ gpu_part_known }} / {{ g }}
      {%- else %} case
        when coalesce({{ ref_den }}, 0) > 0 then ({{ p }} - {{ gpu_part_known }}) * {{ r }} / {{ ref_den }}
        else ({{ p }} - {{ gpu_part_known }}) * {{ w }} / {{ rest_den }} end{% endif %}
    when {{ split }} = 'residual' then
      {%- if kind == 'gpu' %} case when {{ g }} > 0 then {{ p }} * {{ gpu_share }} / {{ g }} else 0.0 end
      {%- else %} case when {{ ref_den }} > 0 then {{ p }} * (1.0 - {{ gpu_share }}) * {{ r }} / {{ ref_den }} else 0.0 end{% endif %}
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


{#- Recommender evidence (models/marts/fct_*_evidence*, fct_container_usage_hourly): histograms that
    merge exactly over any window (sum the counts per bucket), and the one quantile rule read off them. -#}

{% macro pod_holds_resources(phase) -%}
  {#- A pod snapshot that holds its node's resources: not terminated (Succeeded / Failed); an unknown
      phase counts as holding. -#}
  coalesce({{ phase }}, 'Unknown') not in ('Succeeded', 'Failed')
{%- endmacro %}

{% macro util_bucket(u) -%}
  {#- Bucket of a clamped utilisation u in [0, 1]: width 1 / var('util_histogram_buckets') (200: 0.5 %). -#}
  cast(round(({{ u }}) * {{ var('util_histogram_buckets') }}) as smallint)
{%- endmacro %}

{% macro util_bucket_value(b) -%}
  (cast({{ b }} as double) / {{ var('util_histogram_buckets') }})
{%- endmacro %}

{% macro fb_bucket(mib) -%}
  {#- Bucket of a framebuffer-used sample: var('fb_histogram_mib') MiB wide (256). -#}
  cast(floor(greatest({{ mib }}, 0) / {{ var('fb_histogram_mib') }}) as integer)
{%- endmacro %}

{% macro vpa_bucket(value, first_bucket) -%}
  {#- VPA's exponential histogram (recommender/histogram.py HistogramSpec.bucket_of): bucket i covers
      [first·r^i, first·r^(i+1)), r = var('vpa_histogram_ratio'); values below first are bucket 0. -#}
  cast(floor(ln(greatest({{ value }}, {{ first_bucket }}) / {{ first_bucket }}) / ln({{ var('vpa_histogram_ratio') }})) as integer)
{%- endmacro %}

{% macro hist_bucket_sums(relation, keys, hist) -%}
  {#- Per `keys` and bucket b, the summed counts n of the histograms (lists of {b, n}) in column `hist`
      of `relation`: how histograms of any set of rows merge exactly. -#}
  {{ return(adapter.dispatch('hist_bucket_sums', 'gpufinops')(relation, keys, hist)) }}
{%- endmacro %}
{% macro default__hist_bucket_sums(relation, keys, hist) -%}
  {%- set k = keys | join(', ') -%}
  (select {{ k }}, e.b as b, cast(sum(e.n) as bigint) as n
   from (select {{ k }}, {{ explode_list(hist) }} as e from {{ relation }}) as x
   group by {{ k }}, e.b)
{%- endmacro %}
{% macro duckdb__hist_bucket_sums(relation, keys, hist) -%}
  {#- the entries unnested into columns b and n (not a struct column): the 1,000-node month's
      workload-hour merges, ~120 M entries, ~10 % less CPU -#}
  {%- set k = keys | join(', ') -%}
  (select {{ k }}, b, cast(sum(n) as bigint) as n
   from (select {{ k }}, unnest({{ hist }}, recursive := true) from {{ relation }}) as x
   group by {{ k }}, b)
{%- endmacro %}

{% macro hist_list(rows, keys) -%}
  {#- Per `keys`, the histogram list `hist` (sorted by b) of bucket rows (keys, b, n) such as hist_bucket_sums'
      (one row per keys and b). -#}
  {{ return(adapter.dispatch('hist_list', 'gpufinops')(rows, keys)) }}
{%- endmacro %}
{% macro default__hist_list(rows, keys) -%}
  (select {{ keys | join(', ') }}, {{ struct_list([['b', 'b'], ['n', 'n']]) }} as hist
   from {{ rows }} as r
   group by {{ keys | join(', ') }})
{%- endmacro %}
{% macro duckdb__hist_list(rows, keys) -%}
  {#- listed unordered and sorted after (b is unique per list, so the order is b's): cheaper than an
      ordered aggregate -#}
  (select {{ keys | join(', ') }}, list_sort(list({{ make_struct([['b', 'b'], ['n', 'n']]) }})) as hist
   from {{ rows }} as r
   group by {{ keys | join(', ') }})
{%- endmacro %}

{% macro hist_quantiles(relation, keys, qs, hist='hist') -%}
  {#- Per `keys`, the nearest-rank quantiles `qs` (dict alias -> q) of the histogram in column `hist`
      of `relation` (one row per key; a list of {b, n} sorted by b, such as hist_list's): the smallest
      bucket b whose cumulative count reaches q of the list's total. One fold over each list (no
      window over exploded rows); an empty or null list has null quantiles. -#}
  {%- set k = keys | join(', ') -%}
  {%- set start = [['cum', 'cast(0 as bigint)']] -%}
  {%- set step = [['cum', 'cast(acc.cum + e.n as bigint)']] -%}
  {%- for alias, q in qs.items() -%}
    {%- do start.append([alias, 'cast(null as integer)']) -%}
    {%- do step.append([alias, 'coalesce(acc.' ~ alias ~ ', case when acc.cum + e.n >= ' ~ q ~ ' * tot_n - 1e-9 then cast(e.b as integer) end)']) -%}
  {%- endfor -%}
  (select {{ k }}{% for alias in qs %}, r.{{ alias }} as {{ alias }}{% endfor %}
   from (select {{ k }}, {{ list_fold('h', make_struct(start), 'acc', 'e', make_struct(step)) }} as r
         from (select {{ k }}, {{ hist }} as h, {{ hist_count(hist) }} as tot_n from {{ relation }} as src) as t) as f)
{%- endmacro %}


{% macro json_text(col, key) -%}
  {#- The text value of a top-level key of a JSON object held as text (null when absent). -#}
  {{ return(adapter.dispatch('json_text', 'gpufinops')(col, key)) }}
{%- endmacro %}
{% macro default__json_text(col, key) -%}get_json_object({{ col }}, '$.{{ key }}'){%- endmacro %}
{% macro duckdb__json_text(col, key) -%}json_extract_string({{ col }}, '$.{{ key }}'){%- endmacro %}


{% macro billed_unit_hours(request, usage, hours) -%}
  {#- CPU cores or memory GiB a pod is charged for over an hour: max(request, mean usage) × covered hours
      (DESIGN §3 pod cost; the unit quantity behind cpu_cost_usd / memory_cost_usd). -#}
  greatest({{ request }}, coalesce({{ usage }}, 0)) * {{ hours }}
{%- endmacro %}


{% macro provider_display_name(provider) -%}
  {#- The FOCUS ServiceProviderName of a node provider key (aws | gcp | azure). -#}
  case {{ provider }}
    when 'aws' then 'Amazon Web Services'
    when 'gcp' then 'Google Cloud'
    when 'azure' then 'Microsoft'
    else coalesce({{ provider }}, 'Unknown')
  end
{%- endmacro %}


{% macro type_string_map() -%}{{ return(adapter.dispatch('type_string_map', 'gpufinops')()) }}{%- endmacro %}
{% macro default__type_string_map() -%}map<string, string>{%- endmacro %}
{% macro duckdb__type_string_map() -%}map(varchar, varchar){%- endmacro %}


{% macro counter_step(prev, cur) -%}
  {#- A counter sample's increase over the sample before it, as Prometheus increase() reads counters:
      cur − prev, or cur when cur < prev (a reset); 0 without a previous value; null stays null. -#}
  case
    when {{ cur }} is null then null
    when {{ prev }} is null then 0
    when {{ cur }} >= {{ prev }} then {{ cur }} - {{ prev }}
    else {{ cur }}
  end
{%- endmacro %}

{% macro counter_increase(col, partition_by, order_by) -%}
  {#- counter_step over the previous sample of the series (0 for its first sample). -#}
  {{ counter_step('lag(' ~ col ~ ') over (partition by ' ~ partition_by ~ ' order by ' ~ order_by ~ ')', col) }}
{%- endmacro %}


{% macro idle_pct(idle_gpu_hours, measured_gpu_hours) -%}
  {#- Idle share of a GPU allocation: idle GPU-hours over MEASURED GPU-hours (null without any);
      unmeasured hours count neither way. Published to the warehouse as the SQL macro idle_pct
      (macros/faces.sql) so that the faces apply it to their sums over any window. -#}
  case when {{ measured_gpu_hours }} > 0 then {{ idle_gpu_hours }} / {{ measured_gpu_hours }} end
{%- endmacro %}


{% macro shared_cost_basis(recipients, recipient_gpu_cost, recipient_direct_cost, having='true') -%}
  {#- Which weight distributes a shared pool (shared namespaces, overhead, unallocated) over its
      recipients, per var('shared_cost_method'): 'even' (per recipient), 'gpu_cost' (their GPU cost),
      else 'direct_cost' (their direct cost) when they have no GPU cost; null = nothing to distribute
      (separate, no recipients, or `having` false). Used by showback and the FOCUS export alike. -#}
  case
    {%- if var('shared_cost_method') == 'separate' %}
    when true then null
    {%- elif var('shared_cost_method') == 'even' %}
    when {{ having }} and {{ recipients }} > 0 then 'even'
    {%- else %}
    when {{ having }} and {{ recipient_gpu_cost }} > 0 then 'gpu_cost'
    when {{ having }} and {{ recipient_direct_cost }} > 0 then 'direct_cost'
    {%- endif %}
    else null
  end
{%- endmacro %}


{% macro shared_cost_weight(basis, recipients, gpu_cost, recipient_gpu_cost, direct_cost, recipient_direct_cost) -%}
  {#- One recipient's share of a pool under shared_cost_basis (0 when there is no basis). -#}
  case {{ basis }}
    when 'even' then 1.0 / {{ recipients }}
    when 'gpu_cost' then {{ gpu_cost }} / {{ recipient_gpu_cost }}
    when 'direct_cost' then {{ direct_cost }} / {{ recipient_direct_cost }}
    else 0.0
  end
{%- endmacro %}


{% macro complete_cluster_days() -%}
  {#- The days a cluster was metered in full (all 24 hours in fct_node_hourly): the only days the
      change outcomes compare and count (fct_change_outcomes, fct_change_savings_monthly). -#}
    select cluster, cast({{ dbt.date_trunc('day', 'hour') }} as date) as day
    from {{ ref('fct_node_hourly') }}
    group by 1, 2
    having count(distinct hour) = 24
{%- endmacro %}
