"""Where the dbt project (dbt_project.yml, profiles.yml, models/, macros/, seeds/, tests/dbt/) is.

In a source checkout it is the repository root. An installed wheel (the image) carries it as data
files under ``<prefix>/share/gpufinops/dbt`` (``[tool.setuptools.data-files]`` in pyproject.toml).
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

__all__ = ["PROJECT_DIR", "INSTALLED_PROJECT_DIR", "find_project_dir"]

INSTALLED_PROJECT_DIR = Path(sysconfig.get_path("data")) / "share" / "gpufinops" / "dbt"
_CHECKOUT = Path(__file__).resolve().parents[1]


def find_project_dir() -> Path:
    """The checkout's root when it holds ``dbt_project.yml``, else the installed copy."""
    for candidate in (_CHECKOUT, INSTALLED_PROJECT_DIR):
        if (candidate / "dbt_project.yml").is_file():
            return candidate
    return _CHECKOUT  # neither: dbt's own error names the missing dbt_project.yml


PROJECT_DIR = find_project_dir()
