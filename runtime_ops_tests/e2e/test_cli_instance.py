"""`runtime-ops` run from another folder works on the instance it belongs to, as a newcomer runs it: the project's
home and the pipelines folder the instance was started with, without exporting anything; with no instance to find
it refuses in one line saying where it looked, and it never starts a new, empty store of its own. Explicit
settings (RUNTIME_OPS_HOME, RUNTIME_OPS_DATABASE_URL) still win."""

from __future__ import annotations

import json
from pathlib import Path

from runtime_ops_tests.e2e.test_cli_errors import PASSWORD, cli, one_line_error

PIPELINE = """\
type: runtime_ops.components.RetrievalPipeline
attributes:
  name: {name}
  landing: {{uri: {name}-landing}}
"""


def _clone(tmp_path: Path) -> Path:
    """A checkout of the project (its pyproject.toml names it), with a folder inside to run commands from."""
    clone = tmp_path / "runtime_ops"
    (clone / "docs" / "notes").mkdir(parents=True)
    (clone / "pyproject.toml").write_text('[project]\nname = "runtime-ops"\nversion = "0.1.0"\n')
    return clone


def _own_pipelines(tmp_path: Path) -> Path:
    folder = tmp_path / "team-pipelines"
    for name in ("support", "docs"):
        (folder / name).mkdir(parents=True)
        (folder / name / "defs.yaml").write_text(PIPELINE.format(name=name))
    return folder


def _stores_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.name in ("state.db", "audit_key", "link_secret", ".runtime_ops"))


def test_the_cli_run_from_another_folder_finds_the_instance_and_its_pipelines(tmp_path: Path) -> None:
    clone, pipelines = _clone(tmp_path), _own_pipelines(tmp_path)
    home = clone / ".runtime_ops"
    # Started in the project's folder, with a pipelines folder of one's own (as `make dev` would be).
    started = cli("db", "upgrade", cwd=clone, RUNTIME_OPS_PIPELINES_DIR=str(pipelines))
    assert started.returncode == 0, started.stderr

    elsewhere = clone / "docs" / "notes"  # another folder, and nothing exported in this shell
    done = cli("status", cwd=elsewhere)
    assert done.returncode == 0, done.stderr
    assert f"state store : sqlite:///{home / 'state.db'}" in done.stdout
    assert "pipeline support (" in done.stdout and "pipeline docs (" in done.stdout, done.stdout
    assert "pipeline demo" not in done.stdout
    assert json.loads((home / "instance.json").read_text())["pipelines_dir"] == str(pipelines)
    assert all(p == home or home in p.parents for p in _stores_under(tmp_path)), _stores_under(tmp_path)

    made = cli("keys", "create", "newcomer", "--scope", "read", cwd=elsewhere)
    assert made.returncode == 0, made.stderr
    listed = cli("keys", "list", cwd=clone)  # the same store from the project's own folder
    assert "newcomer" in listed.stdout, listed.stdout

    # A test's (or an operator's) explicit settings win over what the instance recorded.
    other = tmp_path / "other-home"
    mine = cli("status", cwd=elsewhere, RUNTIME_OPS_HOME=str(other), RUNTIME_OPS_PIPELINES_DIR=str(pipelines / "docs"))
    assert mine.returncode == 0, mine.stderr
    assert f"sqlite:///{other / 'state.db'}" in mine.stdout and "pipeline support" not in mine.stdout


def test_with_no_instance_to_find_the_cli_refuses_in_one_line_and_creates_nothing(tmp_path: Path) -> None:
    clone = _clone(tmp_path)  # a fresh clone: `make dev` never ran
    for command in (["status"], ["keys", "list"]):
        line = one_line_error(cli(*command, cwd=clone / "docs" / "notes"))
        assert f"{clone / '.runtime_ops'}" in line and "was never started" in line and "make dev" in line, line
    assert _stores_under(tmp_path) == []


def test_an_instance_on_postgresql_is_not_replaced_by_an_empty_local_store(tmp_path: Path, postgres_url: str) -> None:
    clone = _clone(tmp_path)
    home = clone / ".runtime_ops"
    with_password = postgres_url.replace("postgres@", f"postgres:{PASSWORD}@")  # trust auth: accepted, unused
    started = cli("db", "upgrade", cwd=clone, RUNTIME_OPS_DATABASE_URL=with_password)
    assert started.returncode == 0, started.stderr

    # Another shell, without the variable: the instance's database is named (without its password), nothing made.
    line = one_line_error(cli("status", cwd=clone / "docs"))
    assert with_password.replace(PASSWORD, "[REDACTED]") in line and "set RUNTIME_OPS_DATABASE_URL" in line, line
    assert not (home / "state.db").exists() and _stores_under(clone / "docs") == []
    assert PASSWORD not in (home / "instance.json").read_text()

    done = cli("status", cwd=clone / "docs", RUNTIME_OPS_DATABASE_URL=with_password)
    assert done.returncode == 0 and "pipeline demo" in done.stdout, done.stderr
