"""The Finance page's FOCUS 1.3 allocation download (the rows of ``gpufinops export focus``)."""

from __future__ import annotations

from datetime import date

import streamlit as st

from dashboards import queries
from gpufinops.errors import InputError

__all__ = ["focus_download"]


def focus_download(wh: queries.Warehouse, start: date, last_day: date) -> None:
    """A section that prepares the export of [start, last_day] on request, then offers it for download."""
    from exports.focus import export_bytes

    st.subheader("FOCUS 1.3 allocation export")
    st.caption("Every node charge of the bill (or the computed node-day cost where no bill is loaded) split "
               "over namespaces and workloads, the idle remainder and the shared namespaces, as FOCUS 1.3 "
               "rows for a FinOps platform. Same rows as `gpufinops export focus`.")
    fmt = st.radio("Format", ["csv", "parquet"], horizontal=True, key="focus_export_format")
    key = f"focus_export:{start}:{last_day}:{fmt}"
    if st.button("Prepare the FOCUS export", key="focus_export_prepare"):
        try:
            with queries.cursor(wh) as cur:
                st.session_state[key] = export_bytes(cur, start, last_day, fmt)
        except InputError as exc:
            st.session_state.pop(key, None)
            st.info(str(exc))
    data = st.session_state.get(key)
    if data is not None:
        st.download_button(f"Download focus-allocation-{start}-{last_day}.{fmt}", data,
                           file_name=f"focus-allocation-{start}-{last_day}.{fmt}",
                           mime="text/csv" if fmt == "csv" else "application/vnd.apache.parquet",
                           key="focus_export_download")
