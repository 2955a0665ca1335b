"""The faces' read model: what the API, the dashboards and the reports select from the marts, and the
names they show (``names``: the synthetic cost lines, the role vocabulary, the metric names).

Every number is computed in the warehouse (the dbt models and the SQL macros they publish, such as
``idle_pct``); these modules only select, filter by the viewer's scope, and name. Nothing here imports
a face (no Streamlit, no FastAPI).
"""
