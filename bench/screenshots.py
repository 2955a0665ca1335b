"""The README's screenshots, from a running dashboard (e.g. the one `make demo` serves), in headless
Chromium (the same DevTools driver the browser test uses).

``python -m bench.screenshots --base http://localhost:8501 --out docs/screenshots
finance.png='finance?role=finance' team-unit-cost.png='team?role=team-lead:ml-platform' ...``

Each page waits until Streamlit stopped re-rendering; a page that shows an exception box fails.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "dashboards" / "browser.py"


def _browser():
    spec = importlib.util.spec_from_file_location("gpufinops_browser", HERE)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="http://localhost:8501")
    ap.add_argument("--out", type=Path, default=Path("docs/screenshots"))
    ap.add_argument("--height", type=int, default=1800, help="page height of the screenshot, px")
    ap.add_argument("pages", nargs="+", help="FILE.png=PATH?QUERY")
    args = ap.parse_args(argv)
    browser = _browser().Browser(width=1400, height=1000)
    args.out.mkdir(parents=True, exist_ok=True)
    failed = 0
    try:
        for spec in args.pages:
            name, _, path = spec.partition("=")
            page = browser.render(f"{args.base.rstrip('/')}/{path}", wait_for=[], full_height=args.height)
            if page.exceptions:
                print(f"{path}: the page shows an exception: {page.exceptions[0][:300]}", file=sys.stderr)
                failed += 1
                continue
            (args.out / name).write_bytes(page.png)
            print(f"{args.out / name}: {len(page.png):,} bytes")
    finally:
        browser.close()
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
