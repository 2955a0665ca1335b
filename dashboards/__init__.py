"""Streamlit dashboards: finance, team lead and platform views over the warehouse marts."""
