{#- Hourly partial aggregates of the per-minute landing tables: the lake writer writes one beside each
    raw Parquet file it lands (ingest/rollups.py renders these macros with the project's vars and runs
    them in DuckDB over that file's rows, in the same atomic run), so no build re-reads the samples.

    Every column merges exactly over any set of files of the same key: counts and sums add, minima and
    maxima take min / max, histograms (lists of (bucket b, count n)) add per bucket. The formulas are
    the warehouse's own (staging_select, sample_utilization, util_bucket, fb_bucket, vpa_bucket);
    a memory peak's bucket is kept as the bucket of the file's peak, which merges by max because
    vpa_bucket is monotonic. The rollup SQL always runs on DuckDB, whatever the build engine.
    The models that read the rollups: fct_gpu_device_evidence_hourly, int_mig_idle_instances_hourly,
    int_container_usage_hourly, fct_container_usage_hourly, of k8s_pods_last, int_pod_specs and
    fct_pods_latest, and, of k8s_nodes_last, int_nodes_hourly (models/README.md "Hourly rollups"). -#}

{% macro rollup_gpu_samples(relation) -%}
with s as (
    {{ staging_select('gpu_samples', relation) }}
),

b as (
    select
        cluster,
        date_trunc('hour', ts) as hour,
        hostname,
        coalesce(uuid, cast(gpu as varchar)) as device_id,
        coalesce(mig_instance, -1) as mig_instance,
        mig_profile,
        (mig_profile is not null or mig_instance is not null) as mig_flag,
        namespace,
        pod,
        ts,
        utilization,
        fb_used_mib,
        fb_used_mib + fb_free_mib as fb_total_mib,
        {{ util_bucket('utilization') }} as ub,
        {{ fb_bucket('fb_used_mib') }} as fbb
    from s
),

per_bucket as (
    -- g = 1: the utilisation buckets (every sample once); g = 2: the framebuffer buckets
    select
        cluster, hour, hostname, device_id, mig_instance, namespace, pod, ub, fbb,
        grouping(ub, fbb) as g,
        count(utilization) as samples,
        sum(utilization) as util_sum,
        max(utilization) as util_max,
        min(ts) as first_ts,
        max(ts) as last_ts,
        max(mig_profile) as mig_profile,
        bool_or(mig_flag) as is_mig,
        count(fb_used_mib) as fb_samples,
        sum(fb_used_mib) as fb_sum,
        max(fb_used_mib) as fb_used_max_mib,
        max(fb_total_mib) as fb_total_mib
    from b
    group by grouping sets ((cluster, hour, hostname, device_id, mig_instance, namespace, pod, ub),
                            (cluster, hour, hostname, device_id, mig_instance, namespace, pod, fbb))
)

select
    cluster, hour, hostname, device_id, mig_instance, namespace, pod,
    max(mig_profile) as mig_profile,
    bool_or(is_mig) as is_mig,
    cast(sum(samples) filter (where g = 1) as bigint) as samples,
    sum(util_sum) filter (where g = 1) as util_sum,
    max(util_max) as util_max,
    min(first_ts) as first_ts,
    max(last_ts) as last_ts,
    cast(sum(fb_samples) filter (where g = 2) as bigint) as fb_samples,
    sum(fb_sum) filter (where g = 2) as fb_sum,
    max(fb_used_max_mib) as fb_used_max_mib,
    max(fb_total_mib) as fb_total_mib,
    list(struct_pack(b := ub, n := cast(samples as bigint)) order by ub) filter (where g = 1 and ub is not null) as util_hist,
    list(struct_pack(b := fbb, n := cast(fb_samples as bigint)) order by fbb) filter (where g = 2 and fbb is not null) as fb_hist
from per_bucket
group by cluster, hour, hostname, device_id, mig_instance, namespace, pod
{%- endmacro %}


{% macro rollup_container_usage(relation) -%}
with s as (
    {{ staging_select('container_usage', relation) }}
),

b as (
    select
        cluster,
        date_trunc('hour', ts) as hour,
        namespace,
        pod,
        container,
        ts,
        cpu_cores,
        memory_working_set_bytes,
        case when cpu_cores is not null then {{ vpa_bucket('cpu_cores', var('vpa_cpu_first_bucket')) }} end as cb
    from s
),

per_bucket as (
    select
        cluster, hour, namespace, pod, container, cb,
        count(*) as samples,
        count(cpu_cores) as cpu_samples,
        sum(cpu_cores) as cpu_sum,
        count(memory_working_set_bytes) as memory_samples,
        sum(memory_working_set_bytes) as memory_sum,
        max(memory_working_set_bytes) as memory_peak_bytes,
        min(ts) as first_ts,
        max(ts) as last_ts
    from b
    group by cluster, hour, namespace, pod, container, cb
)

select
    cluster, hour, namespace, pod, container,
    cast(sum(samples) as bigint) as samples,
    cast(sum(cpu_samples) as bigint) as cpu_samples,
    sum(cpu_sum) as cpu_sum,
    cast(sum(memory_samples) as bigint) as memory_samples,
    sum(memory_sum) as memory_sum,
    max(memory_peak_bytes) as memory_peak_bytes,
    case when max(memory_peak_bytes) is not null
         then {{ vpa_bucket('max(memory_peak_bytes)', var('vpa_memory_first_bucket')) }} end as memory_peak_bucket,
    min(first_ts) as first_ts,
    max(last_ts) as last_ts,
    list(struct_pack(b := cb, n := cast(cpu_samples as bigint)) order by cb) filter (where cb is not null) as cpu_hist
from per_bucket
group by cluster, hour, namespace, pod, container
{%- endmacro %}


{% macro rollup_serving_requests(relation) -%}
{#- Per serving series (cluster, namespace, pod, model) and hour of the file: the samples, the first
    and last sample's counter values, and the sum of the increases (counter_step) between the part's
    consecutive samples. The increase into a part's first sample (from the sample before it: the
    previous hour, or another file) is the model's (int_serving_counters_hourly), from the parts'
    first and last values, so an hour's increase is exact however the series is split into files. -#}
{%- set counters = ['requests', 'prompt_tokens', 'generation_tokens'] %}
with s as (
    {{ staging_select('serving_requests', relation) }}
),

r as (
    select
        cluster, date_trunc('hour', ts) as hour, namespace, pod, model, ts,
        {%- for c in counters %}
        {{ c }}_total as {{ c }}_v,
        {{ counter_step('lag(' ~ c ~ '_total) over w', c ~ '_total') }} as {{ c }}_step,
        {%- endfor %}
        row_number() over w as rn,
        count(*) over (partition by cluster, namespace, pod, model, date_trunc('hour', ts)) as n
    from s
    window w as (partition by cluster, namespace, pod, model, date_trunc('hour', ts) order by ts)
)

select
    cluster, hour, namespace, pod, model,
    count(*) as samples,
    min(ts) as first_ts,
    max(ts) as last_ts,
    {%- for c in counters %}
    max({{ c }}_v) filter (where rn = 1) as {{ c }}_first,
    max({{ c }}_v) filter (where rn = n) as {{ c }}_last,
    sum({{ c }}_step) filter (where rn > 1) as {{ c }}_inc{{ ',' if not loop.last }}
    {%- endfor %}
from r
group by cluster, hour, namespace, pod, model
{%- endmacro %}


{% macro rollup_k8s_pods(relation) -%}
{#- Per pod (cluster, uid) of the file: every row of its last snapshot in the file. Not an aggregate but
    a selection that merges exactly: a pod's last snapshot over any set of files is the last of its
    files' last snapshots, so the pod-spec model (int_pod_specs) reads these rows instead of every
    snapshot's. It returns the rows' positions (`__row`, added by ingest/rollups.py), and the writer
    keeps those rows as landed, nested columns included, without passing them through the engine. -#}
select b.__row
from {{ relation }} as b
semi join (
    select cluster, uid, max(snapshot_ts) as last_ts
    from {{ relation }}
    group by cluster, uid
) as l
    on b.cluster = l.cluster and b.uid = l.uid and b.snapshot_ts = l.last_ts
order by b.__row
{%- endmacro %}


{% macro rollup_k8s_pod_runs(relation) -%}
{#- Pod presence as runs (the issue's "pod timelines as change intervals"): per pod (cluster, namespace,
    pod, uid, node) and clock hour of its snapshots, each maximal run of the file's consecutive
    snapshots the pod is in holding resources (pod_holds_resources), with the phase at its last.
    int_pods_hourly takes a run's covered seconds per hour from the snapshot timeline's running sums
    (macros/runs.sql) instead of joining and summing every snapshot row. -#}
{{ snapshot_runs(relation, 'k8s_pods', ['namespace', 'pod', 'pod_uid', 'node'], ['phase'], pod_holds_resources('s.phase')) }}
{%- endmacro %}


{% macro rollup_k8s_node_runs(relation) -%}
{#- Node presence as runs, per node name and clock hour (int_nodes_hourly's covered time). -#}
{{ snapshot_runs(relation, 'k8s_nodes', ['node']) }}
{%- endmacro %}


{% macro snapshot_runs(relation, table, keys, carry=[], where='true') -%}
{#- Per key (cluster, `keys`) and clock hour of its snapshots, each maximal run of the file's consecutive
    snapshots the key is in (rows passing `where`): first and last snapshot time, the snapshots in it,
    and each `carry` column at its last snapshot. Runs merge over files by adding: each snapshot row is
    in exactly one run. -#}
with s as (
    {{ staging_select(table, relation) }}
),

snaps as (
    -- the file's snapshots, numbered per cluster in time order
    select cluster, snapshot_ts, row_number() over (partition by cluster order by snapshot_ts) as r
    from (select distinct cluster, snapshot_ts from s) as d
),

live as (
    select s.cluster, date_trunc('hour', s.snapshot_ts) as hour, {% for c in keys + carry %}s.{{ c }}, {% endfor %}s.snapshot_ts, n.r
    from s
    inner join snaps as n
        on s.cluster = n.cluster and s.snapshot_ts = n.snapshot_ts
    where {{ where }}
),

runs as (
    -- consecutive snapshot numbers less the row's number within its key-hour: one value per run
    select *, r - row_number() over (partition by cluster, hour, {{ keys | join(', ') }} order by r) as run
    from live
)

select
    cluster, hour, {{ keys | join(', ') }},
    min(snapshot_ts) as first_ts,
    max(snapshot_ts) as last_ts,
    count(*) as snapshots
    {%- for c in carry %},
    arg_max({{ c }}, snapshot_ts) as {{ c }}
    {%- endfor %}
from runs
group by cluster, hour, {{ keys | join(', ') }}, run
{%- endmacro %}


{% macro rollup_snapshot_times(relation) -%}
{#- The file's snapshot times per cluster (k8s_pod_snapshots, k8s_node_snapshots): the snapshot
    timeline (int_snapshot_timeline) is their union over the lake, read without scanning every
    snapshot row. The time is staged like the snapshots' own (UTC, naive). -#}
select distinct cluster, {{ utc('snapshot_ts') }} as snapshot_ts
from {{ relation }}
{%- endmacro %}


{% macro rollup_k8s_nodes(relation) -%}
{#- Per node (cluster, node name) and clock hour of the file: every row of the node's last snapshot in
    that hour. A selection that merges exactly: a node's last snapshot in an hour over any set of files
    is the last of its files' last snapshots in that hour, and int_nodes_hourly reads a node-hour's
    attributes off these rows instead of every snapshot's maps (a snapshot covering into the next hour
    is the node's last in its own clock hour, so the hour it covers finds it here too). Positions
    (`__row`), as rollup_k8s_pods. -#}
select b.__row
from {{ relation }} as b
semi join (
    select cluster, node, date_trunc('hour', snapshot_ts) as snapshot_hour, max(snapshot_ts) as last_ts
    from {{ relation }}
    group by cluster, node, snapshot_hour
) as l
    on b.cluster = l.cluster and b.node = l.node and b.snapshot_ts = l.last_ts
order by b.__row
{%- endmacro %}
