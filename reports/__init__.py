"""Scheduled reports: HTML with charts and CSV attachments per audience, budget alerts, delivery."""

import logging

import streamlit.runtime.caching.cache_data_api  # noqa: F401  (creates the logger silenced below)

# The reports reuse the dashboards' query functions, which are wrapped by st.cache_data; outside a
# Streamlit server that wrapper logs "No runtime found" on every call. It is harmless here.
logging.getLogger("streamlit.runtime.caching.cache_data_api").setLevel(logging.ERROR)
