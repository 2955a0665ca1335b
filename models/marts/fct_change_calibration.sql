-- How far the recommender's estimates are to be trusted, per recommendation kind: over the measured
-- changes with a positive estimate, the median of realized ÷ estimated monthly savings
-- (fct_change_outcomes), with the counts and totals it rests on.

with outcomes as (
    select * from {{ ref('fct_change_outcomes') }}
),

final as (
    select
        kind,
        count(*) as changes_applied,
        sum(case when outcome_status = 'measured' then 1 else 0 end) as changes_measured,
        sum(case when realized_to_estimated is not null then 1 else 0 end) as changes_calibrated,
        median(realized_to_estimated) as median_realized_to_estimated,
        sum(case when outcome_status = 'measured' then est_monthly_savings_usd end) as est_monthly_savings_usd,
        sum(realized_monthly_savings_usd) as realized_monthly_savings_usd,
        sum(case when regression then 1 else 0 end) as regressions
    from outcomes
    group by 1
)

select * from final
