"""Schemathesis against the app's own OpenAPI schema: generated requests (schema-valid and invalid) for
every operation, as a team lead and as an admin, and not one 5xx.

The operations are driven through Hypothesis directly (``APIOperation.as_strategy``) rather than
``schema.parametrize``: the schema needs a per-test home, and schemathesis' lazy fixture loader does
not work with this pytest version.
"""

from __future__ import annotations

import importlib.util
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

_spec = importlib.util.spec_from_file_location("api_support", Path(__file__).parent / "fixtures/api/support.py")
assert _spec and _spec.loader
support = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(support)


@pytest.mark.timeout(180)
def test_generated_requests_never_get_a_server_error(tmp_path: Path, mini_fleet: Any) -> None:
    settings_, tokens = support.build_home(tmp_path, mini_fleet)
    app = support.make_app(settings_, clock=lambda: datetime(2026, 11, 4, 12, tzinfo=UTC))
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 15
    seen: dict[int, int] = {}

    for op in operations:
        for mode, examples in ((GenerationMode.POSITIVE, 6), (GenerationMode.NEGATIVE, 4)):

            @given(case=op.as_strategy(generation_mode=mode))
            @settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                      suppress_health_check=list(HealthCheck))
            def check(case: Any) -> None:
                for who in ("lead-alpha", "admin"):
                    response = case.call(headers={"Authorization": f"Bearer {tokens[who]}"})
                    seen[response.status_code] = seen.get(response.status_code, 0) + 1
                    case.validate_response(response, checks=(not_a_server_error,))

            try:
                check()
            except Unsatisfiable:
                assert mode is GenerationMode.NEGATIVE  # nothing to make invalid (e.g. no parameters)
    app.state.ctx.warehouse.close()
    assert not any(code >= 500 for code in seen)
    assert any(200 <= code < 300 for code in seen) and any(400 <= code < 500 for code in seen)
