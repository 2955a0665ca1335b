-- One row per (tenant, team) seen in attribution, showback lines included (`unassigned`).
with teams as (
    select tenant, team from {{ ref('int_pod_attributes') }}
    union
    select tenant, team from {{ ref('fct_showback_daily') }}
),

final as (
    select
        tenant,
        team,
        tenant = 'unassigned' or team = 'unassigned' as is_unassigned
    from teams
)

select * from final
