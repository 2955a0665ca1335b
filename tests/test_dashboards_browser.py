"""A real browser: Debian's headless Chromium against `gpufinops serve dashboard --demo`.

Loads each main page, waits for Streamlit's client-side render, checks key text and that no exception
box is shown, and saves a screenshot (into $GPUFINOPS_SCREENSHOT_DIR when set, else the test's tmp dir).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"dash_{name}", HERE / "fixtures/dashboards" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


browser = _load("browser")
support = _load("support")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.skipif(browser.CHROMIUM is None, reason="Debian chromium is not installed (make system-deps)"),
]

PAGES = [
    # (path, texts that must show, texts that must not)
    ("finance?role=finance", ["Total cost", "$3,460.80", "Charged back to teams", "$1,449.60", "Budget vs actual",
                              "Bill reconciliation"], []),
    ("team?role=team-lead:alpha", ["GPU-hours", "$963.20", "78.0%", "Most idle workloads", "Recommendations"],
     ["$486.40", "beta-serve"]),
    ("platform?role=platform-admin", ["GPU capacity", "Bin-packing efficiency", "50.0%", "Stranded GPUs",
                                "Consolidation plan", "Pending GPU pods"], []),
    ("approvals?role=team-lead:alpha", ["Approvals", "rightsize_gpu_count", "Current vs proposed", "Evidence",
                                        "History", "Approve"], ["beta-serve"]),
]


@pytest.fixture(scope="module")
def served(tmp_path_factory, mini_fleet):
    home = tmp_path_factory.mktemp("home")
    support.build_warehouse(home, mini_fleet)
    url = support.build_app_db(home)
    support.propose_change(url, home)  # one alpha change for the Approvals page
    with browser.dashboard_server(home, browser.free_port()) as base:
        chrome = browser.Browser()
        try:
            yield base, chrome
        finally:
            chrome.close()


@pytest.mark.parametrize("path,expected,hidden", PAGES, ids=[p[0].split("?")[0] for p in PAGES])
def test_page_renders_in_chromium(served, path, expected, hidden, tmp_path) -> None:
    base, chrome = served
    page = chrome.render(f"{base}/{path}", wait_for=expected[:2], full_height=2400)
    out = Path(os.environ.get("GPUFINOPS_SCREENSHOT_DIR") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{path.split('?')[0]}.png").write_bytes(page.png)
    assert page.exceptions == []
    for bad in ("Traceback", "Page not found", "Error running app"):
        assert bad not in page.text
    missing = [t for t in expected if t not in page.text]
    assert not missing, f"{path}: missing {missing}\n{page.text[:2000]}"
    for t in hidden:
        assert t not in page.text
    assert page.png[:8] == b"\x89PNG\r\n\x1a\n" and len(page.png) > 20_000
