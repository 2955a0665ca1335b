-- FOCUS split cost allocation: for every origin charge, Σ AllocatedRatio = 1 and Σ allocated
-- BilledCost / EffectiveCost / ListCost = the origin charge's, to 1e-9 (absolute, per charge).
-- Returns the charges that break it.
with per_charge as (
    select
        origin_charge_id,
        sum(allocated_ratio) as ratio_sum,
        sum(billed_cost) as billed_cost,
        max(origin_billed_cost) as origin_billed_cost,
        sum(effective_cost) as effective_cost,
        max(origin_effective_cost) as origin_effective_cost,
        min(origin_effective_cost) as origin_effective_cost_min
    from {{ ref('fct_focus_allocation_daily') }}
    where row_kind <> 'passthrough'
    group by origin_charge_id
)

select *
from per_charge
where abs(ratio_sum - 1) > 1e-9
   or abs(billed_cost - origin_billed_cost) > 1e-9
   or abs(effective_cost - origin_effective_cost) > 1e-9
   or origin_effective_cost <> origin_effective_cost_min
