-- Per physical GPU per hour on a MIG node, from the DCGM GPU-instance series: the GPU instances it
-- reported in the hour and their compute slices in all (S, the layout's size). dcgm-exporter reports
-- every GPU instance, held or idle (an idle one has no pod labels), so S is the layout actually on
-- the GPU. int_pod_allocation_hourly splits the GPU over its instances as g / S.

with instances as (
    select
        cluster,
        hour,
        hostname as node,
        device_id,
        mig_instance,
        max(mig_profile) as mig_profile
    from {{ ref('int_gpu_usage_hourly') }}
    where is_mig
    group by cluster, hour, hostname, device_id, mig_instance
),

final as (
    select
        cluster,
        hour,
        node,
        device_id,
        count(*) as mig_instances,
        -- the g of '<g>g.<mem>gb' is the instance's compute slices (of 7) in every GPU family
        sum({{ safe_cast("regexp_extract(mig_profile, '^([0-9]+)g', 1)", 'integer') }}) as layout_slices,
        {{ sorted_string_agg('mig_profile', '+') }} as layout
    from instances
    group by cluster, hour, node, device_id
)

select * from final
