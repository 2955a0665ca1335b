{#- Reading the Parquet landing lake (ingest/lake.py layout):
      <lake_root>/<table>/cluster=<c>/day=<YYYY-MM-DD>/*.parquet
    The file list is resolved when the model runs (lake_listing: DuckDB globs the lake, Spark gets
    the runner's listing), so a table with no files yet (e.g. billing_focus) becomes a typed empty
    relation instead of an error. -#}

{% macro landing_columns(table) -%}
  {#- DuckDB types of the landing columns; must match ingest/schema.py (a pytest checks it). -#}
  {%- set qty = 'map(varchar, double)' -%}
  {%- set smap = 'map(varchar, varchar)' -%}
  {%- set ctr = 'struct(name varchar, requests ' ~ qty ~ ', limits ' ~ qty ~ ')[]' -%}
  {%- set run = {'cluster': 'varchar', 'ingest_run_id': 'varchar', 'ingested_at': 'timestamp with time zone'} -%}
  {%- set ts = 'timestamp with time zone' -%}
  {%- set tables = {
    'k8s_nodes': [('snapshot_ts', ts), ('node', 'varchar'), ('uid', 'varchar'), ('provider', 'varchar'),
                  ('provider_id', 'varchar'), ('instance_type', 'varchar'), ('region', 'varchar'),
                  ('zone', 'varchar'), ('capacity_type', 'varchar'), ('node_pool', 'varchar'),
                  ('labels', smap), ('annotations', smap),
                  ('taints', 'struct(key varchar, value varchar, effect varchar)[]'),
                  ('unschedulable', 'boolean'), ('capacity', qty), ('allocatable', qty),
                  ('gpu_product', 'varchar'), ('gpu_count', 'integer'), ('gpu_memory_mib', 'bigint'),
                  ('gpu_replicas', 'integer'), ('mig_config', 'varchar'), ('mig_strategy', 'varchar')],
    'k8s_pods': [('snapshot_ts', ts), ('namespace', 'varchar'), ('pod', 'varchar'), ('uid', 'varchar'),
                 ('node', 'varchar'), ('phase', 'varchar'), ('qos_class', 'varchar'), ('priority', 'integer'),
                 ('priority_class', 'varchar'), ('owner_kind', 'varchar'), ('owner_name', 'varchar'),
                 ('labels', smap), ('annotations', smap), ('containers', ctr), ('init_containers', ctr),
                 ('start_time', ts), ('node_selector', smap),
                 ('tolerations', 'struct(key varchar, operator varchar, value varchar, effect varchar)[]'),
                 ('required_node_affinity', 'struct(term integer, key varchar, operator varchar, label_values varchar[])[]')],
    'k8s_namespaces': [('snapshot_ts', ts), ('namespace', 'varchar'), ('labels', smap), ('annotations', smap)],
    'gpu_samples': [('ts', ts), ('hostname', 'varchar'), ('gpu', 'integer'), ('uuid', 'varchar'),
                    ('model_name', 'varchar'), ('mig_profile', 'varchar'), ('mig_instance', 'integer'),
                    ('namespace', 'varchar'), ('pod', 'varchar'), ('container', 'varchar'),
                    ('gr_engine_active', 'float'), ('gpu_util', 'float'), ('fb_used_mib', 'float'),
                    ('fb_free_mib', 'float'), ('power_w', 'float'), ('tensor_active', 'float')],
    'container_usage': [('ts', ts), ('namespace', 'varchar'), ('pod', 'varchar'), ('container', 'varchar'),
                        ('cpu_cores', 'float'), ('memory_working_set_bytes', 'double')],
    'gpu_samples_hourly': [('hour', 'timestamp'), ('hostname', 'varchar'), ('device_id', 'varchar'),
                           ('mig_instance', 'integer'), ('namespace', 'varchar'), ('pod', 'varchar'),
                           ('mig_profile', 'varchar'), ('is_mig', 'boolean'), ('samples', 'bigint'),
                           ('util_sum', 'double'), ('util_max', 'double'), ('first_ts', 'timestamp'),
                           ('last_ts', 'timestamp'), ('fb_samples', 'bigint'), ('fb_sum', 'double'),
                           ('fb_used_max_mib', 'float'), ('fb_total_mib', 'float'),
                           ('util_hist', 'struct(b smallint, n bigint)[]'), ('fb_hist', 'struct(b integer, n bigint)[]')],
    'container_usage_hourly': [('hour', 'timestamp'), ('namespace', 'varchar'), ('pod', 'varchar'),
                               ('container', 'varchar'), ('samples', 'bigint'), ('cpu_samples', 'bigint'),
                               ('cpu_sum', 'double'), ('memory_samples', 'bigint'), ('memory_sum', 'double'),
                               ('memory_peak_bytes', 'double'), ('memory_peak_bucket', 'integer'),
                               ('first_ts', 'timestamp'), ('last_ts', 'timestamp'),
                               ('cpu_hist', 'struct(b integer, n bigint)[]')],
    'serving_requests_hourly': [('hour', 'timestamp'), ('namespace', 'varchar'), ('pod', 'varchar'), ('model', 'varchar'),
                                ('samples', 'bigint'), ('first_ts', 'timestamp'), ('last_ts', 'timestamp'),
                                ('requests_first', 'double'), ('requests_last', 'double'), ('requests_inc', 'double'),
                                ('prompt_tokens_first', 'double'), ('prompt_tokens_last', 'double'), ('prompt_tokens_inc', 'double'),
                                ('generation_tokens_first', 'double'), ('generation_tokens_last', 'double'), ('generation_tokens_inc', 'double')],
    'k8s_pod_runs': [('hour', 'timestamp'), ('namespace', 'varchar'), ('pod', 'varchar'), ('pod_uid', 'varchar'),
                     ('node', 'varchar'), ('first_ts', 'timestamp'), ('last_ts', 'timestamp'),
                     ('snapshots', 'bigint'), ('phase', 'varchar')],
    'k8s_node_runs': [('hour', 'timestamp'), ('node', 'varchar'), ('first_ts', 'timestamp'), ('last_ts', 'timestamp'),
                      ('snapshots', 'bigint')],
    'k8s_pod_snapshots': [('snapshot_ts', 'timestamp')],
    'k8s_node_snapshots': [('snapshot_ts', 'timestamp')],
    'serving_requests': [('ts', ts), ('namespace', 'varchar'), ('pod', 'varchar'), ('model', 'varchar'),
                         ('requests_total', 'double'), ('prompt_tokens_total', 'double'),
                         ('generation_tokens_total', 'double')],
    'applied_changes': [('applied_at', ts), ('change_id', 'varchar'), ('kind', 'varchar'), ('namespace', 'varchar'),
                        ('target_kind', 'varchar'), ('target_name', 'varchar'), ('team', 'varchar'),
                        ('recommendation_id', 'varchar'), ('status', 'varchar'), ('verified_at', ts),
                        ('ended_at', ts), ('est_monthly_savings_usd', 'double')],
    'prices': [('provider', 'varchar'), ('region', 'varchar'), ('instance_type', 'varchar'),
               ('capacity_type', 'varchar'), ('usd_per_hour', 'double'), ('gpu_usd_per_hour', 'double'),
               ('currency', 'varchar'), ('effective_from', ts), ('effective_to', ts), ('source', 'varchar')],
    'billing_focus': [('BillingPeriodStart', ts), ('BillingPeriodEnd', ts), ('ChargePeriodStart', ts),
                      ('ChargePeriodEnd', ts), ('BillingAccountId', 'varchar'), ('SubAccountId', 'varchar'),
                      ('ProviderName', 'varchar'), ('PublisherName', 'varchar'), ('InvoiceIssuerName', 'varchar'),
                      ('ServiceName', 'varchar'), ('ServiceCategory', 'varchar'), ('ChargeCategory', 'varchar'),
                      ('ChargeClass', 'varchar'), ('ChargeDescription', 'varchar'), ('ChargeFrequency', 'varchar'),
                      ('PricingCategory', 'varchar'), ('CommitmentDiscountId', 'varchar'), ('ResourceId', 'varchar'),
                      ('ResourceName', 'varchar'), ('ResourceType', 'varchar'), ('RegionId', 'varchar'),
                      ('AvailabilityZone', 'varchar'), ('SkuId', 'varchar'), ('SkuPriceId', 'varchar'),
                      ('ConsumedQuantity', 'double'), ('ConsumedUnit', 'varchar'), ('PricingQuantity', 'double'),
                      ('PricingUnit', 'varchar'), ('ListCost', 'double'), ('ContractedCost', 'double'),
                      ('BilledCost', 'double'), ('EffectiveCost', 'double'), ('BillingCurrency', 'varchar'),
                      ('Tags', smap), ('focus_version', 'varchar'), ('extra_columns', 'varchar'),
                      ('source_file', 'varchar'), ('file_hash', 'varchar'), ('row_hash', 'varchar')],
  } -%}
  {#- the pod-snapshot rollup keeps each pod's last snapshot rows per file, as landed -#}
  {%- do tables.update({'k8s_pods_last': tables['k8s_pods']}) -%}
  {#- the node-snapshot rollup keeps each node's last snapshot rows per hour and file, as landed -#}
  {%- do tables.update({'k8s_nodes_last': tables['k8s_nodes']}) -%}
  {%- if table not in tables -%}
    {{ exceptions.raise_compiler_error("lake_scan: unknown landing table '" ~ table ~ "'") }}
  {%- endif -%}
  {%- set cols = [] -%}
  {%- for name, typ in tables[table] -%}{%- do cols.append((name, typ)) -%}{%- endfor -%}
  {%- for name in ['cluster', 'ingest_run_id', 'ingested_at'] -%}{%- do cols.append((name, run[name])) -%}{%- endfor -%}
  {{ return(cols) }}
{%- endmacro %}


{% macro lake_files(table, since_day=none) -%}
  {#- The table's Parquet files, optionally only the day= partitions at/after since_day: one day
      for all clusters, or a mapping cluster -> day (clusters not in it: every day). -#}
  {%- if not execute -%}{{ return([]) }}{%- endif -%}
  {%- set files = [] -%}
  {%- for f in lake_listing(table) -%}
    {%- set cluster, day = lake_file_partition(f) -%}
    {%- if since_day is mapping -%}
      {%- set floor = since_day.get(cluster) -%}
    {%- else -%}
      {%- set floor = since_day -%}
    {%- endif -%}
    {%- if floor is none or day >= floor -%}{%- do files.append(f) -%}{%- endif -%}
  {%- endfor -%}
  {{ return(files) }}
{%- endmacro %}


{% macro lake_file_partition(f) -%}
  {#- (cluster, day) of a lake file's path, <table>/cluster=<c>/day=<YYYY-MM-DD>/<file>.parquet -#}
  {{ return(((f.split('/cluster=')[-1]).split('/')[0], (f.split('/day=')[-1])[:10])) }}
{%- endmacro %}


{% macro lake_listing(table) -%}
  {#- Every Parquet file of a landing table, sorted. DuckDB globs the lake itself; Spark SQL has no
      file listing, so the runner lists the lake (transform/spark.py, through Hadoop's FileSystem,
      so object storage too) and passes var lake_files = {table: [file, ...]}. -#}
  {{ return(adapter.dispatch('lake_listing', 'gpufinops')(table)) }}
{%- endmacro %}

{% macro duckdb__lake_listing(table) -%}
  {%- set res = run_query("select file from glob('" ~ lake_glob_pattern(table) | replace("'", "''") ~ "') order by file") -%}
  {{ return(res.columns[0].values() | list) }}
{%- endmacro %}

{% macro spark__lake_listing(table) -%}
  {%- set listed = var('lake_files', none) -%}
  {%- if listed is not mapping -%}
    {{ exceptions.raise_compiler_error("the Spark target needs var lake_files (the lake's Parquet files per table): build with `gpufinops build --engine spark`, or pass it to dbt --vars") }}
  {%- endif -%}
  {{ return(listed.get(table, []) | sort) }}
{%- endmacro %}


{% macro lake_scan(table, since_day=none, since_ts=none) -%}
  {#- The landing table as a relation with every landing column typed. Columns the files already
      hold with the landing type are read as they are (a no-op cast of the nested pod/node columns
      copies every value and costs more than the query around it); a column no file has yet (an
      older lake) reads as a typed null; any other type is cast.
      `since_ts` ('YYYY-MM-DD HH:MM:SS', UTC): only rows at or after it, compared on the file's own
      time column (DuckDB, files of the landing type), which DuckDB checks against each Parquet row
      group's statistics: an hour's build reads the last day's row groups from the window on, not
      the whole day= partition (the staged, converted column cannot be pushed into the scan).
      The whole lake (the staging views) reads a glob of the table's files on DuckDB, not their
      list: the view reads what lands after it was made, so an hourly build keeps it (see
      transform/runner.py kept_staging_views). -#}
  {%- set cols = landing_columns(table) -%}
  {%- set files = lake_files(table, since_day) -%}
  {%- if files | length > 0 -%}
    {%- set source = (lake_glob_relation(table) if since_day is none else none) or parquet_files_relation(files) -%}
    {%- set file_types, canonical = parquet_column_types(source, cols | map(attribute=1) | list) -%}
    (select
      {%- for name, typ in cols %}
        {%- if file_types.get(name) == canonical[loop.index0] %} {{ adapter.quote(name) }}
        {%- elif name in file_types %} cast({{ adapter.quote(name) }} as {{ landing_type(typ) }}) as {{ adapter.quote(name) }}
        {%- else %} cast(null as {{ landing_type(typ) }}) as {{ adapter.quote(name) }}
        {%- endif %}{{ "," if not loop.last }}
      {%- endfor %}
      {%- if table in rollup_file_tables() %}, {{ source_file_column() }} as source_file{% endif %}
     from {{ source }}
     {%- set bound = lake_scan_bound(table, file_types, since_ts) %}
     {%- if bound %} where {{ bound }}{% endif %})
  {%- else -%}
    (select {% for name, typ in cols %}cast(null as {{ landing_type(typ) }}) as {{ adapter.quote(name) }}{{ ", " if not loop.last }}{% endfor %}
     {%- if table in rollup_file_tables() %}, cast(null as {{ landing_type('varchar') }}) as source_file{% endif %} where false)
  {%- endif -%}
{%- endmacro %}


{% macro rollup_file_tables() -%}
  {#- The hourly rollups whose scans carry `source_file`, the Parquet file each row came from: a rollup
      file holds each of its keys once, so an hour that only one file holds needs no merge (macro
      multi_file_hours). -#}
  {{ return(['gpu_samples_hourly', 'container_usage_hourly', 'serving_requests_hourly']) }}
{%- endmacro %}

{% macro source_file_column() -%}
  {#- The path of the Parquet file a scanned row came from. -#}
  {{ return(adapter.dispatch('source_file_column', 'gpufinops')()) }}
{%- endmacro %}
{% macro default__source_file_column() -%}input_file_name(){%- endmacro %}
{% macro duckdb__source_file_column() -%}filename{%- endmacro %}

{% macro multi_file_hours(relation) -%}
  {#- The (cluster, hour)s of a rollup relation (rows with source_file) that more than one file holds:
      only their keys can repeat and need merging. Every other hour's rows are the keys as they are, so
      the models pass them through without a GROUP BY over every row (at 1,000 nodes × 30 days every
      hour is in one file: int_gpu_usage_hourly alone 2.2 -> 1.3 s). A small GROUP BY: one row per
      (cluster, hour, file). -#}
  (select cluster, hour
   from (select distinct cluster, hour, source_file from {{ relation }}) as f
   group by cluster, hour
   having count(*) > 1)
{%- endmacro %}

{% macro file_hour_rows(relation, multi_file, several) -%}
  {#- The rows of `relation` in the hours that several files hold (several=true: their keys to merge),
      or in the hours one file holds (several=false: each key once, as it is); `multi_file` names the
      list of macro multi_file_hours. -#}
  (select p.* from {{ relation }} as p {{ 'semi' if several else 'anti' }} join {{ multi_file }} as m
   on p.cluster = m.cluster and p.hour = m.hour)
{%- endmacro %}


{% macro incremental_cutoff_sql(time_column='hour', cluster='src.cluster') -%}
  {#- The first hour an incremental run rebuilds for the row's cluster, as SQL over `this`: that
      cluster's newest hour in the target minus the lookback (the epoch for a cluster not in it).
      What unit tests (prune_partitions off) read from the mocked `this`; a real run inlines the
      same values (incremental_since). -#}
  {%- set floor = "cast('1970-01-01 00:00:00' as timestamp)" -%}
  (coalesce((select max(t.{{ time_column }}) from {{ this }} as t where t.cluster = {{ cluster }}), {{ floor }})
   - {{ hours_interval(var('incremental_lookback_hours')) }})
{%- endmacro %}


{% macro incremental_since(column, time_column='hour', cluster='src.cluster', minus_hours=none, day=false,
                           late_table=none) -%}
  {#- The incremental window's filter on `column`: column >= the row's cluster's cutoff, that cluster's
      newest `time_column` in the target minus the lookback, less `minus_hours` and truncated to its
      day when `day`. In a real run the watermarks are read once and inlined as a CASE per cluster (a
      correlated subquery would make DuckDB materialise the scanned rows); a cluster not in the
      target yet gets all of its history.
      `late_table`: a landing table that can land late (a serving back-fill): a cluster's window then
      starts at the hour of the oldest window start of that table's runs landed since the live version
      was built (table _late_windows, written by the runner) when that is earlier.
      When every cluster of the lake (var lake_clusters, from the runner) already has rows in the
      target, the smallest cutoff is added as a constant bound: the CASE alone is no filter DuckDB can
      push into a scan or across a join, and the chain of views under a mart was read in full
      (fct_gpu_allocation_hourly at 1,000 nodes: 11.3 -> 0.3 s). -#}
  {%- set floor = "cast('1970-01-01 00:00:00' as timestamp)" -%}
  {%- if not (var('prune_partitions') and execute) -%}
    {%- set cutoffs = [incremental_cutoff_sql(time_column, cluster)] -%}
  {%- else -%}
    {%- set dt = modules.datetime -%}
    {%- set lookback = var('incremental_lookback_hours') -%}
    {%- set starts = {} -%}  {#- cluster: (cutoff as a datetime, as SQL) -#}
    {%- set res = run_query("select cluster, cast(max(" ~ time_column ~ ") as string) from " ~ this ~ " group by cluster") -%}
    {%- for row in res.rows -%}
      {%- do starts.update({row[0]: (dt.datetime.fromisoformat(row[1][:19]) - dt.timedelta(hours=lookback),
                                     "cast('" ~ row[1] ~ "' as timestamp) - " ~ hours_interval(lookback))}) -%}
    {%- endfor -%}
    {%- set late = adapter.get_relation(database=target_database(), schema=target.schema, identifier='_late_windows')
                   if late_table is not none else none -%}
    {%- if late is not none -%}
      {%- set res = run_query("select cluster, cast(min(since) as string) from " ~ late ~ " where table_name = '" ~ late_table ~ "' group by cluster") -%}
      {%- for row in res.rows if row[0] in starts -%}
        {%- set hour = dt.datetime.fromisoformat(row[1][:19]).replace(minute=0, second=0, microsecond=0) -%}
        {%- if hour < starts[row[0]][0] -%}{%- do starts.update({row[0]: (hour, "cast('" ~ hour ~ "' as timestamp)")}) -%}{%- endif -%}
      {%- endfor -%}
    {%- endif -%}
    {%- if starts | length == 0 -%}
      {%- set cutoffs = [floor] -%}
    {%- else -%}
      {%- set cutoffs = [] -%}
      {%- set whens = [] -%}
      {%- for c, start in starts.items() -%}
        {%- do whens.append(" when " ~ cluster ~ " = '" ~ (c | replace("'", "''")) ~ "' then " ~ start[1]) -%}
      {%- endfor -%}
      {%- do cutoffs.append("(case" ~ whens | join ~ " else " ~ floor ~ " end)") -%}
      {%- if every_lake_cluster_in(starts) -%}
        {%- do cutoffs.insert(0, "(" ~ (starts.values() | sort(attribute='0') | first)[1] ~ ")") -%}
      {%- endif -%}
    {%- endif -%}
  {%- endif -%}
  {%- for cutoff in cutoffs -%}
    {%- set bound = cutoff ~ (' - ' ~ hours_interval(minus_hours) if minus_hours else '') -%}
    {{ column }} >= {{ dbt.date_trunc('day', bound) if day else bound }}{{ ' and ' if not loop.last }}
  {%- endfor -%}
{%- endmacro %}


{% macro every_lake_cluster_in(clusters_with_rows) -%}
  {#- Whether every cluster of the lake's fleet tables (var lake_clusters, from the runner) is among
      `clusters_with_rows` (the clusters the target already has rows for): only then may an incremental
      run bound its window by one constant; a cluster new to the target needs all its history. False
      when var lake_clusters is not set or no cluster has rows yet. -#}
  {%- set clusters = var('lake_clusters', none) -%}
  {{ return(clusters_with_rows | length > 0 and clusters is not none
            and clusters | reject('in', clusters_with_rows) | list | length == 0) }}
{%- endmacro %}


{% macro newest_minus_hours(relation, hours, probe=none, time_column='hour') -%}
  {#- The newest `time_column` of `relation` minus `hours`, for a "the last hours" filter. In a real
      run it is read once and inlined as a literal: a scalar subquery in a filter keeps DuckDB from
      pruning the scan (10x at 100 nodes for fct_pods_latest). `probe`: a cheaper relation with the
      same newest value (the table at the left of a view's left joins). Unit tests (prune_partitions
      off) read it from `relation` in SQL. -#}
  {%- if var('prune_partitions') and execute -%}
    {%- set res = run_query("select cast(max(" ~ time_column ~ ") as string) from " ~ (probe if probe is not none else relation)) -%}
    {%- set newest = res.columns[0].values()[0] if res.rows | length > 0 else none -%}
    {%- if newest is none -%}cast(null as timestamp)
    {%- else -%}(cast('{{ newest }}' as timestamp) - {{ hours_interval(hours) }})
    {%- endif -%}
  {%- else -%}
    (select max({{ time_column }}) - {{ hours_interval(hours) }} from {{ relation }})
  {%- endif -%}
{%- endmacro %}


{% macro landing_input(stg_model, table, time_column='hour') -%}
  {#- The staging model, or in a real incremental run the same staging SQL over only the day=
      partitions the run needs, per cluster (so one new hour does not rescan the month). Unit tests
      and full builds read the staging model itself. -#}
  {%- if is_incremental() and var('prune_partitions') and execute -%}
    {%- set margin_h = (var('incremental_lookback_hours') + 1) + var('snapshot_interval_s') * var('coverage_cap_factor') / 3600 -%}
    {%- set res = run_query("select cluster, " ~ day_string("max(" ~ time_column ~ ") - " ~ hours_interval(margin_h)) ~
                            ", cast(max(" ~ time_column ~ ") - " ~ hours_interval(margin_h) ~ " as string)" ~
                            " from " ~ this ~ " group by cluster") -%}
    {%- set since = {} -%}
    {%- set starts = [] -%}
    {%- for row in res.rows -%}{%- do since.update({row[0]: row[1]}) -%}{%- do starts.append(row[2][:19]) -%}{%- endfor -%}
    {#- every lake cluster has rows in the target: the earliest of their starts bounds the rows too -#}
    ({{ staging_select(table, lake_scan(table, since, since_ts=(starts | min) if every_lake_cluster_in(since) else none)) }})
  {%- else -%}
    {{ ref(stg_model) }}
  {%- endif -%}
{%- endmacro %}


{% macro newest_day_input(stg_model, table) -%}
  {#- The staging model over only each cluster's newest day= partition of the lake, which holds that
      cluster's newest rows (the writer files a row under the UTC day of its own time column): what a
      model that keeps only each cluster's latest snapshot needs, without scanning the month (the
      node snapshots at 1,000 nodes and 60 s: 43 M rows, 38 node-seconds of a full build). Unit tests
      (prune_partitions off) read the staging model itself. -#}
  {%- if var('prune_partitions') and execute -%}
    {%- set newest = {} -%}
    {%- for f in lake_listing(table) -%}
      {%- set cluster, day = lake_file_partition(f) -%}
      {%- if day > newest.get(cluster, '') -%}{%- do newest.update({cluster: day}) -%}{%- endif -%}
    {%- endfor -%}
    ({{ staging_select(table, lake_scan(table, newest)) }})
  {%- else -%}
    {{ ref(stg_model) }}
  {%- endif -%}
{%- endmacro %}


{% macro optional_seed(name, columns) -%}
  {#- A seed another part owns (e.g. namespace_teams): the loaded table, or a typed empty relation
      when it has not been loaded, so attribution still works without the mapping. -#}
  {%- set rel = adapter.get_relation(database=target_database(), schema=target.schema, identifier=name) if execute else none -%}
  {%- if rel is not none -%}
    (select {% for c in columns %}cast({{ adapter.quote(c) }} as string) as {{ adapter.quote(c) }}{{ ", " if not loop.last }}{% endfor %} from {{ rel }})
  {%- else -%}
    (select {% for c in columns %}cast(null as string) as {{ adapter.quote(c) }}{{ ", " if not loop.last }}{% endfor %} where false)
  {%- endif -%}
{%- endmacro %}


{% macro lake_glob_pattern(table) -%}
  {#- the glob of every Parquet file of a landing table in the lake -#}
  {{ return((var('lake_root') | string).rstrip('/') ~ '/' ~ table ~ '/cluster=*/day=*/*.parquet') }}
{%- endmacro %}

{% macro lake_glob_relation(table) -%}
  {#- A relation over every Parquet file of a landing table, by a glob the engine expands whenever
      the relation is read (none where the engine has no glob: Spark reads listed files). -#}
  {{ return(adapter.dispatch('lake_glob_relation', 'gpufinops')(table)) }}
{%- endmacro %}

{% macro default__lake_glob_relation(table) -%}{{ return(none) }}{%- endmacro %}

{% macro duckdb__lake_glob_relation(table) -%}
  {{ return("read_parquet('" ~ lake_glob_pattern(table) | replace("'", "''") ~ "', union_by_name = true, hive_partitioning = false)") }}
{%- endmacro %}

{% macro parquet_files_relation(files) -%}
  {#- A relation over the given Parquet files, columns unioned by name, no Hive partition columns
      (cluster is a column of every file). -#}
  {{ return(adapter.dispatch('parquet_files_relation', 'gpufinops')(files)) }}
{%- endmacro %}

{% macro duckdb__parquet_files_relation(files) -%}
  read_parquet([{% for f in files %}'{{ f | replace("'", "''") }}'{{ ", " if not loop.last }}{% endfor %}], union_by_name = true, hive_partitioning = false)
{%- endmacro %}

{% macro spark__parquet_files_relation(files) -%}
  {#- One Hadoop glob naming every file ({a,b,...}); spark.sql.parquet.mergeSchema (set by the
      runner's session) unions the files' columns by name. Partition discovery does not apply to
      globbed paths, so cluster= / day= do not become columns. -#}
  {#- a partition's files are all in or all out (lake_files filters by partition): name the folders -#}
  {%- set dirs = [] -%}
  {%- for f in files -%}
    {%- set d = f.rsplit('/', 1)[0] | replace('\\', '\\\\') | replace('{', '\\{') | replace('}', '\\}') | replace(',', '\\,') | replace('`', '``') -%}
    {%- if d not in dirs -%}{%- do dirs.append(d) -%}{%- endif -%}
  {%- endfor -%}
  {#- the alternatives go after the folders' common prefix: a path must start with its root -#}
  {%- set ns = namespace(prefix=dirs[0].rsplit('/', 1)[0]) -%}
  {%- for d in dirs -%}
    {%- for _ in range(64) if not (d ~ '/').startswith(ns.prefix ~ '/') -%}{%- set ns.prefix = ns.prefix.rsplit('/', 1)[0] -%}{%- endfor -%}
  {%- endfor -%}
  {%- set rest = [] -%}
  {%- for d in dirs -%}{%- do rest.append(d[ns.prefix | length + 1:]) -%}{%- endfor -%}
  parquet.`{{ dirs[0] if dirs | length == 1 else ns.prefix ~ '/{' ~ rest | join(',') ~ '}' }}/*.parquet`
{%- endmacro %}


{% macro parquet_column_types(source, types) -%}
  {#- ({column: engine type name} of a relation, [the engine's own spelling of each landing type in
      `types`, as the first reports it]): a file column of the landing type is read as it is -#}
  {{ return(adapter.dispatch('parquet_column_types', 'gpufinops')(source, types)) }}
{%- endmacro %}

{% macro duckdb__parquet_column_types(source, types) -%}
  {#- one query: the relation's columns and a typed null of each landing type, described together -#}
  {%- set probes = [] -%}
  {%- for typ in types -%}{%- do probes.append("cast(null as " ~ typ ~ ") as \"__gf_type_" ~ loop.index0 ~ "\"") -%}{%- endfor -%}
  {%- set described = run_query("describe select *" ~ (", " ~ probes | join(", ") if probes else "") ~ " from " ~ source) -%}
  {%- set file_types = {} -%}
  {%- set canonical = [] -%}
  {%- for row in described.rows -%}
    {%- if loop.index0 < (described.rows | length) - (types | length) -%}{%- do file_types.update({row[0]: row[1]}) -%}
    {%- else -%}{%- do canonical.append(row[1]) -%}
    {%- endif -%}
  {%- endfor -%}
  {{ return([file_types, canonical]) }}
{%- endmacro %}

{% macro spark__parquet_column_types(source, types) -%}
  {%- set described = run_query("describe query select * from " ~ source) -%}
  {%- set file_types = {} -%}
  {%- for row in described.rows -%}{%- do file_types.update({row[0]: row[1] | replace(' ', '')}) -%}{%- endfor -%}
  {%- set names = [] -%}
  {%- for typ in types -%}{%- do names.append(landing_type(typ) | replace(' ', '')) -%}{%- endfor -%}
  {{ return([file_types, names]) }}
{%- endmacro %}


{% macro landing_type(typ) -%}
  {#- a landing type of landing_columns (DuckDB spelling) in the engine's SQL -#}
  {{ return(adapter.dispatch('landing_type', 'gpufinops')(typ)) }}
{%- endmacro %}

{% macro duckdb__landing_type(typ) -%}{{ typ }}{%- endmacro %}

{% macro spark__landing_type(typ) -%}
  {#- struct(a t, ...)[] -> array<struct<a:t,...>>, map(k, v) -> map<k,v>; scalar names mapped -#}
  {%- set t = typ | trim -%}
  {%- set scalars = {'varchar': 'string', 'timestamp with time zone': 'timestamp_ltz', 'timestamp': 'timestamp_ntz', 'integer': 'int',
                     'bigint': 'bigint', 'float': 'float', 'double': 'double', 'boolean': 'boolean'} -%}
  {%- if t.endswith('[]') -%}
    {{- 'array<' ~ spark__landing_type(t[:-2]) ~ '>' -}}
  {%- elif t.startswith('map(') -%}
    {%- set kv = t[4:-1].split(',', 1) -%}
    {{- 'map<' ~ spark__landing_type(kv[0]) ~ ',' ~ spark__landing_type(kv[1]) ~ '>' -}}
  {%- elif t.startswith('struct(') -%}
    {#- split the fields at top-level commas -#}
    {%- set ns = namespace(depth=0, cur='', fields=[]) -%}
    {%- for ch in t[7:-1] -%}
      {%- if ch == ',' and ns.depth == 0 -%}{%- do ns.fields.append(ns.cur) -%}{%- set ns.cur = '' -%}
      {%- else -%}
        {%- if ch == '(' -%}{%- set ns.depth = ns.depth + 1 -%}{%- elif ch == ')' -%}{%- set ns.depth = ns.depth - 1 -%}{%- endif -%}
        {%- set ns.cur = ns.cur ~ ch -%}
      {%- endif -%}
    {%- endfor -%}
    {%- do ns.fields.append(ns.cur) -%}
    {%- set parts = [] -%}
    {%- for fld in ns.fields -%}
      {%- set nt = fld | trim -%}
      {%- set name = nt.split(' ', 1)[0] -%}
      {%- do parts.append(name ~ ':' ~ spark__landing_type(nt.split(' ', 1)[1])) -%}
    {%- endfor -%}
    {{- 'struct<' ~ parts | join(',') ~ '>' -}}
  {%- else -%}
    {{- scalars.get(t, t) -}}
  {%- endif -%}
{%- endmacro %}


{% macro lake_scan_bound(table, file_types, since_ts) -%}
  {#- lake_scan's `since_ts` filter on the raw time column ('' = none): DuckDB only, and only when
      the files hold that column with its landing type (no cast between the filter and the scan). -#}
  {%- set columns = {'k8s_pods': ('snapshot_ts', 'TIMESTAMP WITH TIME ZONE', 'timestamptz'),
                     'k8s_pods_last': ('snapshot_ts', 'TIMESTAMP WITH TIME ZONE', 'timestamptz'),
                     'k8s_nodes': ('snapshot_ts', 'TIMESTAMP WITH TIME ZONE', 'timestamptz'),
                     'k8s_nodes_last': ('snapshot_ts', 'TIMESTAMP WITH TIME ZONE', 'timestamptz'),
                     'gpu_samples_hourly': ('hour', 'TIMESTAMP', 'timestamp'),
                     'k8s_pod_runs': ('hour', 'TIMESTAMP', 'timestamp'),
                     'k8s_node_runs': ('hour', 'TIMESTAMP', 'timestamp'),
                     'k8s_pod_snapshots': ('snapshot_ts', 'TIMESTAMP', 'timestamp'),
                     'k8s_node_snapshots': ('snapshot_ts', 'TIMESTAMP', 'timestamp'),
                     'container_usage_hourly': ('hour', 'TIMESTAMP', 'timestamp')} -%}
  {%- if since_ts is none or target.type != 'duckdb' or table not in columns -%}{{ return('') }}{%- endif -%}
  {%- set column, file_type, literal = columns[table] -%}
  {%- if file_types.get(column) != file_type -%}{{ return('') }}{%- endif -%}
  {%- set suffix = '+00' if literal == 'timestamptz' else '' -%}
  {{ return(adapter.quote(column) ~ " >= cast('" ~ since_ts ~ suffix ~ "' as " ~ literal ~ ")") }}
{%- endmacro %}
