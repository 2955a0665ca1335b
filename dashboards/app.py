"""Entry script: ``streamlit run dashboards/app.py`` (or ``gpufinops serve dashboard``).

Resolves who is looking, then offers only the pages their roles open. Page scripts hold layout only;
their SQL is in ``dashboards.queries``, scoped by the viewer's role there.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from dashboards.session import context

st.set_page_config(page_title="gpufinops", page_icon=":material/memory:", layout="wide")

_HERE = Path(__file__).resolve().parent
# (key, script, title, icon); session.PAGE_ROLES says who sees each
# The default page is served at "/" only (its own path would say "page not found"), so it is Home.
_PAGES = [
    ("home", "views/home.py", "Home", ":material/home:"),
    ("finance", "views/finance.py", "Finance", ":material/payments:"),
    ("team", "views/team.py", "Team", ":material/groups:"),
    ("platform", "views/platform.py", "Platform", ":material/dns:"),
    ("approvals", "views/approvals.py", "Approvals", ":material/fact_check:"),
]


def _signed_out() -> None:
    st.title("gpufinops")
    st.error("You are not signed in, or your groups grant no role here.")
    st.caption("Open the dashboards through the auth proxy; ask an admin to add you to a gpufinops group.")


ctx = context()
if not ctx.settings.warehouse_path.exists():
    st.title("gpufinops")
    st.info(f"No warehouse at `{ctx.settings.warehouse_path}` yet. Run `gpufinops demo` then `gpufinops build`.")
    st.stop()

pages = [
    st.Page(_HERE / script, title=title, icon=icon, url_path=key, default=key == "home")
    for key, script, title, icon in _PAGES
    if ctx.may_open(key)
]
if not ctx.identity.signed_in or not pages:
    pages = [st.Page(_signed_out, title="Sign in", url_path="signin")]
st.sidebar.caption(f"Signed in as **{ctx.identity.label}**" + (" — demo" if ctx.identity.demo else ""))
st.navigation(pages).run()
