"""Layout-only page scripts, run by ``st.navigation`` from ``dashboards/app.py``.

Not named ``pages/``: Streamlit treats a ``pages/`` folder beside the entry script as its legacy
multipage folder and would then run a page file without the entry script (and its identity check).
"""
