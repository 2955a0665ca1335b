{#- The staging SQL of each landing table over a relation (the whole lake in the stg_ views,
    or only the recent day= partitions in an incremental run; see landing_input). Times become
    naive UTC timestamps; nothing else is derived here except the utilisation of a DCGM sample. -#}

{% macro utc(col) -%}
  {#- timestamptz -> naive UTC timestamp by arithmetic on the instant: a time-zone conversion per
      row (ICU) costs more than the whole hourly GROUP BY over the DCGM samples. -#}
  {{ return(adapter.dispatch('utc', 'gpufinops')(col)) }}
{%- endmacro %}

{% macro default__utc(col) -%}
  cast({{ col }} as timestamp)
{%- endmacro %}

{% macro spark__utc(col) -%}
  {#- the landing timestamptz read as timestamp_ltz; the session time zone is UTC (transform/spark.py) -#}
  cast({{ col }} as timestamp_ntz)
{%- endmacro %}

{% macro duckdb__utc(col) -%}
  make_timestamp(epoch_us({{ col }}))
{%- endmacro %}


{% macro staging_select(table, relation) -%}
  {%- if table in ('k8s_nodes', 'k8s_nodes_last') -%}
    select cluster, {{ utc('snapshot_ts') }} as snapshot_ts, node, uid as node_uid, coalesce(provider, 'unknown') as provider,
           provider_id, instance_type, region, zone, coalesce(capacity_type, 'on_demand') as capacity_type,
           node_pool, labels, annotations, taints, coalesce(unschedulable, false) as unschedulable, capacity, allocatable,
           gpu_product, gpu_count, gpu_memory_mib, gpu_replicas, mig_config, mig_strategy
    from {{ relation }}
  {%- elif table in ('k8s_pods', 'k8s_pods_last') -%}
    select cluster, {{ utc('snapshot_ts') }} as snapshot_ts, namespace, pod, uid as pod_uid, node, phase,
           qos_class, priority, priority_class, owner_kind, owner_name, labels, annotations,
           containers, init_containers, {{ utc('start_time') }} as start_time, node_selector, tolerations, required_node_affinity
    from {{ relation }}
  {%- elif table == 'k8s_namespaces' -%}
    select cluster, {{ utc('snapshot_ts') }} as snapshot_ts, namespace, labels, annotations
    from {{ relation }}
  {%- elif table == 'gpu_samples' -%}
    select cluster, {{ utc('ts') }} as ts, hostname, gpu, uuid, model_name, nullif(mig_profile, '') as mig_profile,
           mig_instance, nullif(namespace, '') as namespace, nullif(pod, '') as pod, container,
           {{ sample_utilization('gr_engine_active', 'gpu_util') }} as utilization,
           fb_used_mib, fb_free_mib, power_w
    from {{ relation }}
  {%- elif table == 'container_usage' -%}
    select cluster, {{ utc('ts') }} as ts, namespace, pod, container, cpu_cores, memory_working_set_bytes
    from {{ relation }}
  {%- elif table in ('gpu_samples_hourly', 'container_usage_hourly', 'serving_requests_hourly', 'k8s_pod_runs',
                     'k8s_node_runs', 'k8s_pod_snapshots', 'k8s_node_snapshots') -%}
    {#- the rollups are staged already (macros/rollups.sql); only the run columns are left out -#}
    select {% for name, typ in landing_columns(table) if name not in ('ingest_run_id', 'ingested_at') %}{{ name }}{{ ", " if not loop.last }}{% endfor %}
           {%- if table in rollup_file_tables() %}, source_file{% endif %}
    from {{ relation }}
  {%- elif table == 'serving_requests' -%}
    select cluster, {{ utc('ts') }} as ts, namespace, pod, model, requests_total, prompt_tokens_total,
           generation_tokens_total
    from {{ relation }}
  {%- elif table == 'applied_changes' -%}
    select cluster, change_id, kind, namespace, target_kind, target_name, team, recommendation_id, status,
           {{ utc('applied_at') }} as applied_at, {{ utc('verified_at') }} as verified_at,
           {{ utc('ended_at') }} as ended_at, est_monthly_savings_usd
    from {{ relation }}
  {%- elif table == 'prices' -%}
    select provider, region, instance_type, capacity_type, usd_per_hour, gpu_usd_per_hour, currency,
           {{ utc('effective_from') }} as effective_from, {{ utc('effective_to') }} as effective_to, source
    from {{ relation }}
  {%- elif table == 'billing_focus' -%}
    select {{ utc('ChargePeriodStart') }} as charge_period_start, {{ utc('ChargePeriodEnd') }} as charge_period_end,
           ProviderName as provider_name, ServiceName as service_name, ChargeCategory as charge_category,
           ResourceId as resource_id, ResourceName as resource_name, ResourceType as resource_type,
           RegionId as region_id, BilledCost as billed_cost, EffectiveCost as effective_cost,
           ListCost as list_cost, BillingCurrency as billing_currency, PricingCategory as pricing_category,
           source_file, row_hash,
           {{ utc('BillingPeriodStart') }} as billing_period_start, {{ utc('BillingPeriodEnd') }} as billing_period_end,
           BillingAccountId as billing_account_id, SubAccountId as sub_account_id,
           PublisherName as publisher_name, InvoiceIssuerName as invoice_issuer_name,
           ServiceCategory as service_category, ChargeClass as charge_class,
           ChargeDescription as charge_description, ChargeFrequency as charge_frequency,
           CommitmentDiscountId as commitment_discount_id, AvailabilityZone as availability_zone,
           SkuId as sku_id, SkuPriceId as sku_price_id, ConsumedQuantity as consumed_quantity,
           ConsumedUnit as consumed_unit, PricingQuantity as pricing_quantity, PricingUnit as pricing_unit,
           ContractedCost as contracted_cost, Tags as tags, focus_version, extra_columns
    from {{ relation }}
  {%- else -%}
    {{ exceptions.raise_compiler_error("staging_select: unknown landing table '" ~ table ~ "'") }}
  {%- endif -%}
{%- endmacro %}


{% macro not_materialized() -%}
  {#- Hint for a CTE over a landing scan that a model reads twice: DuckDB would otherwise
      materialise it (every snapshot row with its nested columns, GBs) instead of scanning twice. -#}
  {{ return(adapter.dispatch('not_materialized', 'gpufinops')()) }}
{%- endmacro %}

{% macro default__not_materialized() -%}{%- endmacro %}

{% macro duckdb__not_materialized() -%}not materialized{%- endmacro %}
