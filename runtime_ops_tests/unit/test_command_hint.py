"""Hints that name the `runtime-ops` command run as printed: the venv's path from a checkout where it is not on
PATH, the bare name where PATH finds this interpreter's command."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runtime_ops import command_hint
from runtime_ops.approvals.operators import OperatorRefused, operator
from runtime_ops.settings import Settings
from runtime_ops.store import open_store

VENV_BIN = Path(sys.prefix) / "bin"
ROOT = Path(__file__).resolve().parents[2]


def _runs(hint: str, cwd: Path) -> None:
    argv0 = hint.split()[0]
    found = shutil.which(argv0, path=os.environ.get("PATH")) if "/" not in argv0 else str(cwd / argv0)
    assert found is not None and os.access(found, os.X_OK), f"{hint!r} does not run from {cwd}"
    out = subprocess.run([found, "--help"], capture_output=True, text=True, timeout=60, cwd=cwd)
    assert out.returncode == 0 and "usage: runtime-ops" in out.stdout


def test_from_the_checkout_without_the_venv_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    hint = command_hint.command("keys list")
    assert hint == f"{(VENV_BIN / 'runtime-ops').relative_to(ROOT)} keys list"
    _runs(hint, ROOT)


def test_on_path_it_is_bare(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{VENV_BIN}:/usr/bin:/bin")
    assert command_hint.cli() == "runtime-ops"


def test_from_another_folder_it_is_absolute(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert command_hint.cli() == str(VENV_BIN / "runtime-ops")
    _runs(command_hint.command("--help"), tmp_path)


def test_the_operator_refusal_names_a_command_that_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    store = open_store(f"sqlite:///{tmp_path / 'state.db'}", Settings())
    with pytest.raises(OperatorRefused) as refused:
        operator(store.api_keys, None)
    hint = str(refused.value).split("`")[1]
    assert hint.endswith("keys create <name> --scope decide --approver <your approver id>")
    _runs(hint, ROOT)
