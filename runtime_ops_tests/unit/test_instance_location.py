"""Where a command finds its instance (`runtime_ops.cli.instance.locate`), on folders of the test's own: the installed
project's checkout from an unrelated folder, the nearest recorded instance, explicit variables first, refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime_ops.cli.instance import NoInstance, locate


def _project(folder: Path, *, started: dict[str, object] | None = None) -> Path:
    """A checkout of runtime_ops at `folder`; `started`: its home holds a store and this record."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pyproject.toml").write_text('[project]\nname = "runtime-ops"\n')
    if started is not None:
        home = folder / ".runtime_ops"
        home.mkdir()
        (home / "state.db").write_bytes(b"")
        (home / "instance.json").write_text(json.dumps(started))
    return folder


def test_from_an_unrelated_folder_the_installed_checkouts_instance_with_its_pipelines(tmp_path: Path) -> None:
    pipelines = tmp_path / "pipelines"
    pipelines.mkdir()
    checkout = _project(tmp_path / "checkout", started={"pipelines_dir": str(pipelines), "database": None})
    elsewhere = tmp_path / "my-corpus"
    elsewhere.mkdir()
    assert locate(elsewhere, {}, "uses", checkout=checkout) == {
        "RUNTIME_OPS_HOME": str(checkout / ".runtime_ops"),
        "RUNTIME_OPS_PIPELINES_DIR": str(pipelines),
    }
    # Variables the shell sets win; only the rest is filled in.
    own = {"RUNTIME_OPS_PIPELINES_DIR": "/srv/pipelines", "RUNTIME_OPS_HOME": str(checkout / ".runtime_ops")}
    assert locate(elsewhere, own, "uses", checkout=checkout) == {}


def test_the_nearest_recorded_instance_comes_before_the_checkout(tmp_path: Path) -> None:
    checkout = _project(tmp_path / "checkout", started={"pipelines_dir": None, "database": None})
    team = tmp_path / "team"
    (team / ".runtime_ops").mkdir(parents=True)
    (team / ".runtime_ops" / "instance.json").write_text(json.dumps({"database": "sqlite:////data/state.db"}))
    (team / "a" / "b").mkdir(parents=True)
    assert locate(team / "a" / "b", {}, "uses", checkout=checkout) == {
        "RUNTIME_OPS_HOME": str(team / ".runtime_ops"),
        "RUNTIME_OPS_DATABASE_URL": "sqlite:////data/state.db",
    }


def test_no_instance_is_refused_saying_where_it_looked_but_a_start_may_make_one(tmp_path: Path) -> None:
    nowhere = tmp_path / "wheel-install"  # no checkout: the package came from a wheel
    nowhere.mkdir()
    with pytest.raises(NoInstance) as refused:
        locate(tmp_path, {}, "uses", checkout=nowhere)
    assert f"in {tmp_path} and every folder above it" in str(refused.value) and str(nowhere) in str(refused.value)
    assert locate(tmp_path, {}, "starts", checkout=nowhere) == {}  # `runtime-ops dev` here: a home here
    # The store named explicitly is used as it is.
    assert locate(tmp_path, {"RUNTIME_OPS_DATABASE_URL": "postgresql://db/x"}, "uses", checkout=nowhere) == {}

    fresh = _project(tmp_path / "fresh-clone")
    with pytest.raises(NoInstance, match="was never started: start it with `make dev`"):
        locate(fresh, {}, "uses", checkout=nowhere)
    assert locate(fresh, {}, "starts", checkout=nowhere) == {"RUNTIME_OPS_HOME": str(fresh / ".runtime_ops")}


def test_a_record_naming_what_is_gone_is_refused(tmp_path: Path) -> None:
    gone = _project(tmp_path / "a", started={"pipelines_dir": str(tmp_path / "moved"), "database": None})
    with pytest.raises(NoInstance, match=r"serves the pipelines of .*moved.*set RUNTIME_OPS_PIPELINES_DIR"):
        locate(gone, {}, "uses", checkout=gone)
    lost = _project(tmp_path / "b", started={"pipelines_dir": None, "database": None})
    (lost / ".runtime_ops" / "state.db").unlink()
    with pytest.raises(NoInstance, match=r"state store of the instance .* is missing"):
        locate(lost, {}, "uses", checkout=lost)
    assert locate(lost, {}, "restores", checkout=lost) == {"RUNTIME_OPS_HOME": str(lost / ".runtime_ops")}
