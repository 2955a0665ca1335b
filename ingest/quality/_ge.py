"""Great Expectations, imported lazily: one ephemeral context per process, pandas frames only.

GX takes seconds to import, so nothing imports it until a check actually has something to
report (or a caller asks for a full GX validation); a clean batch never pays for it.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any

__all__ = ["GeOutcome", "expectations", "gx_module", "validate_frame"]

_LOCK = threading.Lock()
_STATE: dict[str, Any] = {}


@dataclass
class GeOutcome:
    """One expectation's result, reduced to what a message needs."""

    expectation_type: str
    success: bool
    element_count: int
    unexpected_count: int
    unexpected_values: list[Any] = field(default_factory=list)
    unexpected_index_list: list[int] = field(default_factory=list)
    raw: Any = None  # the GX ExpectationValidationResult, for callers who want all of it


def expectations() -> Any:
    """The ``great_expectations.expectations`` module (imported on first use)."""
    _context()
    return _STATE["gxe"]


def gx_module() -> Any:
    """The ``great_expectations`` package (imported on first use)."""
    _context()
    return _STATE["gx"]


def _context() -> Any:
    with _LOCK:
        if "ctx" not in _STATE:
            # No usage statistics leave this process; this machine may have no network at all.
            os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
            import great_expectations as gx
            import great_expectations.expectations as gxe
            from great_expectations.data_context.types.base import ProgressBarsConfig

            ctx = gx.get_context(mode="ephemeral")
            ctx.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
            source = ctx.data_sources.add_pandas("gpufinops_quality")
            asset = source.add_dataframe_asset("frame")
            _STATE.update(gx=gx, gxe=gxe, ctx=ctx, batch_definition=asset.add_batch_definition_whole_dataframe("whole"))
        return _STATE["ctx"]


def validate_frame(frame: Any, expectation_list: list[Any], *, suite_name: str) -> list[GeOutcome]:
    """Validate a pandas frame against expectations; results in the order of ``expectation_list``."""
    _context()
    gx = _STATE["gx"]
    with _LOCK:  # GX's context is not meant to be shared between threads mid-validation
        suite = gx.ExpectationSuite(name=suite_name)
        for exp in expectation_list:
            suite.add_expectation(exp)
        batch = _STATE["batch_definition"].get_batch(batch_parameters={"dataframe": frame})
        result = batch.validate(suite, result_format={"result_format": "COMPLETE", "partial_unexpected_count": 20})
    by_id = {r.expectation_config.id: r for r in result.results}
    out = []
    for exp in suite.expectations:
        r = by_id[exp.id]
        res = r.result or {}
        out.append(
            GeOutcome(
                expectation_type=r.expectation_config.type,
                success=bool(r.success),
                element_count=int(res.get("element_count") or len(frame)),
                unexpected_count=int(res.get("unexpected_count") or 0),
                unexpected_values=list(res.get("partial_unexpected_list") or []),
                unexpected_index_list=list(res.get("unexpected_index_list") or []),
                raw=r,
            )
        )
    return out
