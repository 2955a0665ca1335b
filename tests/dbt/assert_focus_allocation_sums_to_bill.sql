-- The FOCUS allocation export of the bill's (day, provider) adds up to the bill: Σ BilledCost and
-- Σ EffectiveCost of the rows from bill lines (split or passed through) = the bill's, per day, to 1e-6.
with exported as (
    select day, sum(billed_cost) as billed_cost, sum(effective_cost) as effective_cost
    from {{ ref('fct_focus_allocation_daily') }}
    where charge_origin = 'bill'
    group by day
),

billed as (
    select day, sum(billed_cost) as billed_cost, sum(effective_cost) as effective_cost
    from {{ ref('int_bill_lines') }}
    group by day
)

select b.day, b.billed_cost, e.billed_cost as exported_billed_cost, b.effective_cost,
       e.effective_cost as exported_effective_cost
from billed as b
left join exported as e on b.day = e.day
where e.day is null
   or abs(b.billed_cost - e.billed_cost) > 1e-6
   or abs(b.effective_cost - e.effective_cost) > 1e-6
