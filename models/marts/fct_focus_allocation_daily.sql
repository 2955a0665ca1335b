-- The FOCUS 1.3 split cost allocation of every origin charge (docs/focus-export.md).
-- Origin charges:
--   bill      a FOCUS bill line matched to a node-day (int_bill_lines, as fct_bill_reconciliation_daily);
--   computed  a node-day's computed cost, on a (day, provider) the loaded bill does not cover;
--   a bill line that belongs to no node passes through unchanged (row_kind passthrough, ratio null).
-- Each origin charge is split by its node-day's computed cost shares:
--   allocated    one row per (namespace, workload_kind, workload) on the node that day:
--                ratio = the group's pod cost / the node-day's cost, with one element per resource
--                (GPU-Hours or MIG-Slice-Hours, vCPU-Hours, GiB-Hours);
--   shared       when shared_cost_method is proportional or even, the shared namespaces' ratio is
--                handed to the node-day's other groups (by GPU cost, else direct cost; or evenly),
--                one row per recipient with AllocatedMethodId gpufinops/shared-<method>/v1; the
--                shared namespaces then have no row of their own (separate: they keep it);
--   unallocated  the remainder, 1 − Σ the other ratios (the node's idle and unrequested capacity),
--                with a null allocated resource; a node-day that cost nothing computed is all remainder.
-- Where no bill covers the cluster's (day, provider), the fixed overhead of fct_showback_daily's
-- `(overhead)` line is a computed origin charge of its own, split over the cluster-day's non-shared
-- workloads as shared_cost_method says (AllocatedMethodId gpufinops/overhead-<method>/v1; separate or
-- no recipient: all unallocated). With a bill, the provider's own control-plane lines pass through.
-- Amounts (billed, effective, list, contracted cost, pricing and consumed quantity) = ratio × the
-- origin charge's; so Σ ratio = 1 and Σ amounts = the origin's per origin charge (tested to 1e-9).
-- Incremental: delete+insert per day, the days of macro focus_window (from the earliest cluster's
-- cutoff, plus every older day whose bill changed since the last build); a full refresh rebuilds all.
{{ incremental_by(['day'], ['day']) }}
{%- set method = var('shared_cost_method') %}
{%- set in_window = focus_window('day') %}

with node_days as (
    select * from {{ ref('int_node_days') }} where {{ in_window }}
),

bill_lines as (
    select * from {{ ref('int_bill_lines') }} where {{ in_window }}
),

bill_days as (
    select distinct day, provider from bill_lines
),

groups as (
    -- per (day, cluster, node, namespace, workload): usage and cost (int_workload_node_daily)
    select * from {{ ref('int_workload_node_daily') }} where {{ in_window }}
),

shares as (
    select
        g.*,
        g.gpu_cost_usd / n.computed_cost_usd as gpu_ratio,
        g.cpu_cost_usd / n.computed_cost_usd as cpu_ratio,
        g.memory_cost_usd / n.computed_cost_usd as memory_ratio,
        g.direct_cost_usd / n.computed_cost_usd as direct_ratio
    from groups as g
    inner join node_days as n
        on g.day = n.day and g.cluster = n.cluster and g.node = n.node
    where n.computed_cost_usd > 0
),

pools as (
    select
        day,
        cluster,
        node,
        sum(direct_ratio) as pods_ratio,
        sum(case when is_shared then direct_ratio else 0 end) as shared_ratio,
        sum(case when is_shared then 0 else 1 end) as recipients,
        sum(case when is_shared then 0 else gpu_cost_usd end) as recipient_gpu_cost_usd,
        sum(case when is_shared then 0 else direct_cost_usd end) as recipient_direct_cost_usd
    from shares
    group by 1, 2, 3
),

distribution as (
    select
        *,
        {{ shared_cost_basis('recipients', 'recipient_gpu_cost_usd', 'recipient_direct_cost_usd', having='shared_ratio > 0') }} as share_basis
    from pools
),

allocated_rows as (
    select
        s.day, s.cluster || '/' || s.node as split_key, 'allocated' as row_kind,
        'gpufinops/node-cost-share/v1' as allocated_method_id,
        s.namespace, s.workload_kind, s.workload, s.team, s.tenant, s.tier,
        s.direct_ratio as allocated_ratio,
        s.gpu_ratio,
        case when s.mig_slice_hours > 0 then 'MIG-Slice-Hours' else 'GPU-Hours' end as gpu_usage_unit,
        case when s.mig_slice_hours > 0 then s.mig_slice_hours else s.gpu_hours end as gpu_usage_quantity,
        s.cpu_ratio,
        s.vcpu_hours,
        s.memory_ratio,
        s.gib_hours
    from shares as s
    inner join distribution as d
        on s.day = d.day and s.cluster = d.cluster and s.node = d.node
    where not s.is_shared or d.share_basis is null
),

shared_rows as (
    select
        s.day, s.cluster || '/' || s.node as split_key, 'shared' as row_kind,
        'gpufinops/shared-{{ method }}/v1' as allocated_method_id,
        s.namespace, s.workload_kind, s.workload, s.team, s.tenant, s.tier,
        d.shared_ratio * {{ shared_cost_weight('d.share_basis', 'd.recipients', 's.gpu_cost_usd', 'd.recipient_gpu_cost_usd', 's.direct_cost_usd', 'd.recipient_direct_cost_usd') }} as allocated_ratio,
        cast(null as double) as gpu_ratio,
        case d.share_basis when 'even' then 'Workloads' when 'gpu_cost' then 'GPU-Hours' else 'USD' end as gpu_usage_unit,
        case d.share_basis when 'even' then 1.0 when 'gpu_cost' then s.gpu_hours else s.direct_cost_usd end
            as gpu_usage_quantity,
        cast(null as double) as cpu_ratio,
        cast(null as double) as vcpu_hours,
        cast(null as double) as memory_ratio,
        cast(null as double) as gib_hours
    from shares as s
    inner join distribution as d
        on s.day = d.day and s.cluster = d.cluster and s.node = d.node
    where not s.is_shared and d.share_basis is not null
),

unallocated_rows as (
    select
        n.day, n.node_key as split_key, 'unallocated' as row_kind,
        'gpufinops/node-cost-share/v1' as allocated_method_id,
        cast(null as string) as namespace, cast(null as string) as workload_kind,
        cast(null as string) as workload, cast(null as string) as team, cast(null as string) as tenant,
        cast(null as string) as tier,
        1.0 - coalesce(p.pods_ratio, 0) as allocated_ratio,
        cast(null as double) as gpu_ratio,
        'GPU-Hours' as gpu_usage_unit,
        n.unallocated_gpu_hours as gpu_usage_quantity,
        cast(null as double) as cpu_ratio,
        cast(null as double) as vcpu_hours,
        cast(null as double) as memory_ratio,
        cast(null as double) as gib_hours
    from node_days as n
    left join pools as p
        on n.day = p.day and n.cluster = p.cluster and n.node = p.node
),

cluster_days as (
    select day, cluster, max(provider) as provider, max(region) as region
    from node_days
    group by 1, 2
),

overhead_charges as (
    select
        s.day,
        s.cluster,
        c.provider,
        c.region,
        s.direct_cost_usd as overhead_usd
    from {{ ref('fct_showback_daily') }} as s
    inner join cluster_days as c
        on s.day = c.day and s.cluster = c.cluster
    where s.namespace = '(overhead)' and s.direct_cost_usd > 0  -- the window's days: cluster_days
),

cluster_recipients as (
    select
        day, cluster, namespace, workload_kind, workload,
        max(team) as team, max(tenant) as tenant, max(tier) as tier,
        sum(gpu_hours) as gpu_hours, sum(gpu_cost_usd) as gpu_cost_usd, sum(direct_cost_usd) as direct_cost_usd
    from groups
    where not is_shared
    group by 1, 2, 3, 4, 5
),

overhead_basis as (
    select
        o.day, o.cluster,
        count(r.workload) as recipients,
        coalesce(sum(r.gpu_cost_usd), 0) as recipient_gpu_cost_usd,
        coalesce(sum(r.direct_cost_usd), 0) as recipient_direct_cost_usd
    from overhead_charges as o
    left join cluster_recipients as r on o.day = r.day and o.cluster = r.cluster
    group by 1, 2
),

overhead_distribution as (
    select
        *,
        {{ shared_cost_basis('recipients', 'recipient_gpu_cost_usd', 'recipient_direct_cost_usd') }} as share_basis
    from overhead_basis
),

overhead_shared_rows as (
    select
        r.day, r.cluster || '/(overhead)' as split_key, 'shared' as row_kind,
        'gpufinops/overhead-{{ method }}/v1' as allocated_method_id,
        r.namespace, r.workload_kind, r.workload, r.team, r.tenant, r.tier,
        {{ shared_cost_weight('d.share_basis', 'd.recipients', 'r.gpu_cost_usd', 'd.recipient_gpu_cost_usd', 'r.direct_cost_usd', 'd.recipient_direct_cost_usd') }} as allocated_ratio,
        cast(null as double) as gpu_ratio,
        case d.share_basis when 'even' then 'Workloads' when 'gpu_cost' then 'GPU-Hours' else 'USD' end as gpu_usage_unit,
        case d.share_basis when 'even' then 1.0 when 'gpu_cost' then r.gpu_hours else r.direct_cost_usd end
            as gpu_usage_quantity,
        cast(null as double) as cpu_ratio,
        cast(null as double) as vcpu_hours,
        cast(null as double) as memory_ratio,
        cast(null as double) as gib_hours
    from cluster_recipients as r
    inner join overhead_distribution as d on r.day = d.day and r.cluster = d.cluster
    where d.share_basis is not null
),

overhead_unallocated_rows as (
    select
        d.day, d.cluster || '/(overhead)' as split_key, 'unallocated' as row_kind,
        'gpufinops/overhead-{{ method }}/v1' as allocated_method_id,
        cast(null as string) as namespace, cast(null as string) as workload_kind,
        cast(null as string) as workload, cast(null as string) as team, cast(null as string) as tenant,
        cast(null as string) as tier,
        1.0 as allocated_ratio,
        cast(null as double) as gpu_ratio,
        cast(null as string) as gpu_usage_unit,
        cast(null as double) as gpu_usage_quantity,
        cast(null as double) as cpu_ratio,
        cast(null as double) as vcpu_hours,
        cast(null as double) as memory_ratio,
        cast(null as double) as gib_hours
    from overhead_distribution as d
    where d.share_basis is null
),

splits as (
    select * from overhead_shared_rows
    union all
    select * from overhead_unallocated_rows
    union all
    select * from allocated_rows
    union all
    select * from shared_rows
    union all
    select * from unallocated_rows
),

bill_origins as (
    select
        'bill' as charge_origin,
        b.row_hash as origin_charge_id,
        b.day,
        n.cluster,
        n.node,
        b.node_key as split_key,
        b.billing_period_start,
        b.billing_period_end,
        b.charge_period_start,
        b.charge_period_end,
        b.billing_account_id,
        {{ json_text('b.extra_columns', 'BillingAccountName') }} as billing_account_name,
        b.sub_account_id,
        b.provider_name as service_provider_name,
        coalesce({{ json_text('b.extra_columns', 'HostProviderName') }}, b.provider_name) as host_provider_name,
        coalesce(b.invoice_issuer_name, b.provider_name) as invoice_issuer_name,
        b.publisher_name,
        b.service_name,
        b.service_category,
        b.charge_category,
        b.charge_class,
        b.charge_description,
        b.charge_frequency,
        b.pricing_category,
        b.commitment_discount_id,
        b.resource_id,
        b.resource_name,
        b.resource_type,
        b.region_id,
        b.availability_zone,
        b.sku_id,
        b.sku_price_id,
        b.consumed_unit,
        b.pricing_unit,
        b.billing_currency,
        b.tags,
        b.billed_cost,
        b.effective_cost,
        b.list_cost,
        b.contracted_cost,
        b.pricing_quantity,
        b.consumed_quantity
    from bill_lines as b
    left join node_days as n
        on b.day = n.day and b.node_key = n.node_key
),

computed_origins as (
    select
        'computed' as charge_origin,
        'computed:' || n.node_key || ':' || cast(n.day as string) as origin_charge_id,
        n.day,
        n.cluster,
        n.node,
        n.node_key as split_key,
        cast({{ dbt.date_trunc('month', 'n.day') }} as timestamp) as billing_period_start,
        cast({{ dbt.dateadd('month', 1, dbt.date_trunc('month', 'n.day')) }} as timestamp) as billing_period_end,
        cast(n.day as timestamp) as charge_period_start,
        cast({{ dbt.dateadd('day', 1, 'n.day') }} as timestamp) as charge_period_end,
        n.cluster as billing_account_id,
        n.cluster as billing_account_name,
        cast(null as string) as sub_account_id,
        {{ provider_display_name('n.provider') }} as service_provider_name,
        {{ provider_display_name('n.provider') }} as host_provider_name,
        {{ provider_display_name('n.provider') }} as invoice_issuer_name,
        cast(null as string) as publisher_name,
        'Kubernetes node (computed by gpufinops)' as service_name,
        'Compute' as service_category,
        'Usage' as charge_category,
        cast(null as string) as charge_class,
        'Computed node-day cost: no FOCUS bill is loaded for this day and provider' as charge_description,
        'Usage-Based' as charge_frequency,
        'Standard' as pricing_category,
        cast(null as string) as commitment_discount_id,
        coalesce(n.instance_id, n.node) as resource_id,
        n.node as resource_name,
        'Kubernetes Node' as resource_type,
        n.region as region_id,
        cast(null as string) as availability_zone,
        n.instance_type as sku_id,
        cast(null as string) as sku_price_id,
        'Hours' as consumed_unit,
        'Hours' as pricing_unit,
        'USD' as billing_currency,
        cast(null as {{ type_string_map() }}) as tags,
        n.computed_cost_usd as billed_cost,
        n.computed_cost_usd as effective_cost,
        n.computed_cost_usd as list_cost,
        n.computed_cost_usd as contracted_cost,
        n.covered_hours as pricing_quantity,
        n.covered_hours as consumed_quantity
    from node_days as n
    where not exists (select 1 from bill_days as d where d.day = n.day and d.provider = n.provider)
),

overhead_origins as (
    select
        'computed' as charge_origin,
        'computed:' || o.cluster || '/(overhead):' || cast(o.day as string) as origin_charge_id,
        o.day,
        o.cluster,
        cast(null as string) as node,
        o.cluster || '/(overhead)' as split_key,
        cast({{ dbt.date_trunc('month', 'o.day') }} as timestamp) as billing_period_start,
        cast({{ dbt.dateadd('month', 1, dbt.date_trunc('month', 'o.day')) }} as timestamp) as billing_period_end,
        cast(o.day as timestamp) as charge_period_start,
        cast({{ dbt.dateadd('day', 1, 'o.day') }} as timestamp) as charge_period_end,
        o.cluster as billing_account_id,
        o.cluster as billing_account_name,
        cast(null as string) as sub_account_id,
        {{ provider_display_name('o.provider') }} as service_provider_name,
        {{ provider_display_name('o.provider') }} as host_provider_name,
        {{ provider_display_name('o.provider') }} as invoice_issuer_name,
        cast(null as string) as publisher_name,
        'Kubernetes cluster overhead (configured in gpufinops)' as service_name,
        'Management and Governance' as service_category,
        'Usage' as charge_category,
        cast(null as string) as charge_class,
        'Fixed cluster overhead (control plane, load balancers) at the configured $/h: no FOCUS bill is loaded for this day and provider' as charge_description,
        'Usage-Based' as charge_frequency,
        'Standard' as pricing_category,
        cast(null as string) as commitment_discount_id,
        o.cluster as resource_id,
        o.cluster as resource_name,
        'Kubernetes Cluster' as resource_type,
        o.region as region_id,
        cast(null as string) as availability_zone,
        cast(null as string) as sku_id,
        cast(null as string) as sku_price_id,
        cast(null as string) as consumed_unit,
        cast(null as string) as pricing_unit,
        'USD' as billing_currency,
        cast(null as {{ type_string_map() }}) as tags,
        o.overhead_usd as billed_cost,
        o.overhead_usd as effective_cost,
        o.overhead_usd as list_cost,
        o.overhead_usd as contracted_cost,
        cast(null as double) as pricing_quantity,
        cast(null as double) as consumed_quantity
    from overhead_charges as o
    where not exists (select 1 from bill_days as d where d.day = o.day and d.provider = o.provider)
),

origins as (
    select * from bill_origins where split_key is not null
    union all
    select * from computed_origins
    union all
    select * from overhead_origins
),

split_rows as (
    select
        o.*,
        s.row_kind,
        s.allocated_method_id,
        s.namespace,
        s.workload_kind,
        s.workload,
        s.team,
        s.tenant,
        s.tier,
        s.allocated_ratio,
        s.gpu_ratio,
        s.gpu_usage_unit,
        s.gpu_usage_quantity,
        s.cpu_ratio,
        s.vcpu_hours,
        s.memory_ratio,
        s.gib_hours
    from origins as o
    inner join splits as s
        on o.day = s.day and o.split_key = s.split_key
),

passthrough_rows as (
    select
        o.*,
        'passthrough' as row_kind,
        cast(null as string) as allocated_method_id,
        cast(null as string) as namespace,
        cast(null as string) as workload_kind,
        cast(null as string) as workload,
        cast(null as string) as team,
        cast(null as string) as tenant,
        cast(null as string) as tier,
        cast(null as double) as allocated_ratio,
        cast(null as double) as gpu_ratio,
        cast(null as string) as gpu_usage_unit,
        cast(null as double) as gpu_usage_quantity,
        cast(null as double) as cpu_ratio,
        cast(null as double) as vcpu_hours,
        cast(null as double) as memory_ratio,
        cast(null as double) as gib_hours
    from bill_origins as o
    where o.split_key is null
),

unioned as (
    select * from split_rows
    union all
    select * from passthrough_rows
),

final as (
    select
        origin_charge_id || '|' || row_kind || '|' || coalesce(cluster || '/' || namespace || '/' || workload_kind || '/' || workload, '')
            as allocation_row_id,
        charge_origin,
        origin_charge_id,
        row_kind,
        day,
        cluster,
        node,
        billing_period_start,
        billing_period_end,
        charge_period_start,
        charge_period_end,
        billing_account_id,
        billing_account_name,
        sub_account_id,
        service_provider_name,
        host_provider_name,
        invoice_issuer_name,
        publisher_name,
        service_name,
        service_category,
        charge_category,
        charge_class,
        charge_description,
        charge_frequency,
        pricing_category,
        commitment_discount_id,
        resource_id,
        resource_name,
        resource_type,
        region_id,
        availability_zone,
        sku_id,
        sku_price_id,
        consumed_unit,
        pricing_unit,
        billing_currency,
        tags,
        billed_cost as origin_billed_cost,
        effective_cost as origin_effective_cost,
        coalesce(allocated_ratio, 1.0) * billed_cost as billed_cost,
        coalesce(allocated_ratio, 1.0) * effective_cost as effective_cost,
        coalesce(allocated_ratio, 1.0) * list_cost as list_cost,
        coalesce(allocated_ratio, 1.0) * contracted_cost as contracted_cost,
        coalesce(allocated_ratio, 1.0) * pricing_quantity as pricing_quantity,
        coalesce(allocated_ratio, 1.0) * consumed_quantity as consumed_quantity,
        allocated_method_id,
        allocated_ratio,
        case when row_kind in ('allocated', 'shared')
             then 'k8s://' || cluster || '/' || namespace || '/' || workload_kind || '/' || workload end
            as allocated_resource_id,
        case when row_kind in ('allocated', 'shared') then namespace || '/' || workload end as allocated_resource_name,
        namespace,
        workload_kind,
        workload,
        team,
        tenant,
        tier,
        gpu_ratio,
        gpu_usage_unit,
        gpu_usage_quantity,
        cpu_ratio,
        vcpu_hours,
        memory_ratio,
        gib_hours
    from unioned
)

select * from final
