"""The allocation curve as a PNG (matplotlib, headless)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["write_chart"]


def write_chart(result: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, r in result["policies"].items():
        xs = [p[0] for p in r["alloc_curve"]]
        ys = [p[1] for p in r["alloc_curve"]]
        ax.plot(xs, ys, label=f"{name} ({r['final_alloc_pct']:.1f} %)")
    ax.plot([0, 100], [0, 100], color="grey", lw=0.8, ls=":")
    ax.set_xlabel("arrived GPU requests, % of capacity")
    ax.set_ylabel("allocated GPUs, % of capacity")
    ax.set_xlim(0, 130)
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(alpha=0.3)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
