"""dbt's saved parse is dropped when the project's files changed since it was made
(transform.runner.forget_stale_parse): dbt's partial parsing once kept a post-hook an upgrade had
removed (docs/bench.md, twenty-second session)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from gpufinops.project import PROJECT_DIR
from transform.runner import PARSE_RECORD, forget_stale_parse, project_content_digest, record_parse


def _project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    proj.mkdir()
    for name in ("dbt_project.yml", "profiles.yml"):
        shutil.copy(PROJECT_DIR / name, proj / name)
    for sub in ("models", "macros"):
        shutil.copytree(PROJECT_DIR / sub, proj / sub)
    return proj


def test_a_saved_parse_of_other_project_files_or_another_writer_is_removed(tmp_path: Path) -> None:
    proj, target = _project(tmp_path), tmp_path / "target"
    saved = target / "partial_parse.msgpack"
    target.mkdir()
    saved.write_bytes(b"a parse of an unknown project")
    assert forget_stale_parse(target, proj)  # no record: the saved parse is not trusted
    assert not saved.exists()

    saved.write_bytes(b"dbt's parse of these files")  # an invocation parses, then records
    record_parse(target, proj)
    assert (target / PARSE_RECORD).read_text().strip() == project_content_digest(proj)
    assert not forget_stale_parse(target, proj)  # the same files: kept
    assert saved.exists()

    # an upgrade: a model's YAML loses a hook, and a macro file goes (the case dbt got wrong)
    yml = proj / "models" / "marts" / "fct_cluster_capacity_hourly.yml"
    yml.write_text(yml.read_text() + "\n# changed\n")
    assert forget_stale_parse(target, proj)
    assert not saved.exists()
    saved.write_bytes(b"dbt's parse of the upgraded files")
    record_parse(target, proj)
    (proj / "macros" / "budgets.sql").unlink()
    assert forget_stale_parse(target, proj)

    # the same files, but the saved parse was rewritten after the record (another gpufinops version)
    saved.write_bytes(b"dbt's parse of these files")
    record_parse(target, proj)
    assert not forget_stale_parse(target, proj)
    later = (target / PARSE_RECORD).stat().st_mtime_ns + 1_000_000
    os.utime(saved, ns=(later, later))
    assert forget_stale_parse(target, proj)
    assert not saved.exists()


def test_the_digest_is_of_content_not_of_times(tmp_path: Path) -> None:
    proj = _project(tmp_path)
    before = project_content_digest(proj)
    path = proj / "macros" / "formulas.sql"
    text = path.read_text()
    path.write_text(text)  # rewritten, same bytes: a newer mtime only
    assert project_content_digest(proj) == before
    path.write_text(text.replace("select", "SELECT", 1))
    assert project_content_digest(proj) != before
