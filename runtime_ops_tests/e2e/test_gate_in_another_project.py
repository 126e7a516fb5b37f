"""The built wheel, installed into another Dagster project's own venv: `uv build --wheel` of this checkout, a fresh
`uv venv`, a throwaway project in a temp folder (its own pyproject.toml, root module, one asset with evidence in its
metadata, a downstream asset calling `require_approval`, and `defs/labels_gate/defs.yaml` declaring the gate).
Everything then runs from that venv as separate processes, as the other team would run it: `dg list components`,
`dg check defs`, `dagster asset materialize`, `runtime-ops db upgrade / keys create / serve / audit verify`, and a
small driver that evaluates the gate's sensor as the daemon does (its cursor kept, run keys deduplicated against the
instance's runs). Nothing of this checkout is importable there: a file the wheel lacks fails here.

Its gate wants two approvals of three approvers, so each request is decided by two channels: the ops API then the
CLI (operator keys), a signed Slack click then a signed link; the person who launched a materialization may not
approve it (four eyes), and a request nobody decides expires, failing closed. Supersede, escalation and the
auto-approve rule are covered in-process by runtime_ops_tests/integration/test_asset_gate.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime_ops_tests.support import web
from runtime_ops_tests.support.servers import free_port, wait_until
from runtime_ops_tests.support.slack_server import SlackServer
from runtime_ops_tests.support.slack_signing import interaction_body, sign

pytestmark = pytest.mark.slow(seconds=108)  # alone on 2 cores, quiet (Dec 2026): mostly imports in the new venv

CHECKOUT = Path(__file__).resolve().parents[2]
SECRET = "9c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f"
CHANNEL = "C0ML"
SENSOR = "scoring__ticket_labels__approval_sensor"

PYPROJECT = """\
[project]
name = "gated-project"
version = "0.1.0"
dependencies = ["runtime-ops"]

[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[tool.setuptools.packages.find]
include = ["gated_project*"]

[tool.dg]
directory_type = "project"

[tool.dg.project]
root_module = "gated_project"
"""

DEFINITIONS = """\
from pathlib import Path

import dagster as dg


@dg.definitions
def defs() -> dg.Definitions:
    return dg.load_from_defs_folder(project_root=Path(__file__).parent.parent)
"""

ASSETS = """\
import os

import dagster as dg
from runtime_ops.components import require_approval

TARGET = dg.AssetKey(["scoring", "ticket_labels"])


@dg.asset(key=TARGET)
def ticket_labels() -> dg.MaterializeResult:
    # GATED_ACCURACY stands in for a labelling run's measured accuracy (each run's data differs by it).
    accuracy = float(os.environ["GATED_ACCURACY"])
    return dg.MaterializeResult(metadata={"accuracy": accuracy, "labelled": 120, "cost_usd": 12.5})


@dg.asset(key=["scoring", "published_labels"], deps=[TARGET])
def published_labels(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    request = require_approval(context, TARGET)
    return dg.MaterializeResult(metadata={"approval_id": request["id"]})
"""

GATE_YAML = f"""\
type: runtime_ops.components.ApprovalGate
attributes:
  target: scoring/ticket_labels
  evidence: [accuracy, labelled, cost_usd]
  auto_approve: "accuracy >= 0.92 and cost_usd < 50"
  approvers: [U1, U2, U3]
  required_approvals: 2
  slack_channel: {CHANNEL}
  on_approval: {{materialize: [scoring/published_labels]}}
"""

# Run in the project's venv after each step, as the daemon would tick: prints the gate check's latest result, then
# evaluates the gate's sensor once (its cursor kept in a file; a run key launched before is skipped, as the daemon
# skips it) and runs what it requests; one process, so one import of Dagster per step. Options (environment):
# GATED_AS=U materializes the target first in a run launched by U (Dagster tags it `dagster/user`, as Dagster+
# does); GATED_HOURS_LATER=N ticks N hours from now (the gate's clock, as a day without a decision would);
# GATED_VERIFY=1 then runs the check alone and the downstream asset alone, and reports both.
DRIVER = f"""\
import json
import os
from datetime import timedelta
from pathlib import Path

import dagster as dg
from dagster._core.storage.tags import RUN_KEY_TAG, SENSOR_NAME_TAG

from gated_project.definitions import defs as load_defs

SENSOR = {SENSOR!r}
CHECK = dg.AssetCheckKey(dg.AssetKey(["scoring", "ticket_labels"]), "approval")
PUBLISHED = dg.AssetKey(["scoring", "published_labels"])
CURSOR = Path(__file__).with_name("sensor_cursor")

defs = load_defs()
repo = defs.get_repository_def()
TARGET_DEF = defs.resolve_assets_def(CHECK.asset_key)
if os.environ.get("GATED_HOURS_LATER"):
    from runtime_ops import clock

    later, real_now = timedelta(hours=float(os.environ["GATED_HOURS_LATER"])), clock.now
    clock.now = lambda: real_now() + later
with dg.DagsterInstance.get() as instance:
    if os.environ.get("GATED_AS"):
        dg.materialize([TARGET_DEF, *(defs.asset_checks or [])], instance=instance, resources=defs.resources,
                       tags={{"dagster/user": os.environ["GATED_AS"]}})
    record = instance.event_log_storage.get_latest_asset_check_execution_by_key([CHECK]).get(CHECK)
    evaluation = record.event.dagster_event.event_specific_data if record and record.event else None
    check = evaluation and {{
        "passed": evaluation.passed, "severity": evaluation.severity.value,
        **{{k: v.value for k, v in evaluation.metadata.items()}},
    }}
    sensor = repo.get_sensor_def(SENSOR)
    cursor = CURSOR.read_text() if CURSOR.exists() else None
    with dg.build_sensor_context(instance=instance, definitions=defs, resources=defs.resources,
                                 cursor=cursor) as context:
        result = sensor.evaluate_tick(context)
    if result.cursor is not None:
        CURSOR.write_text(result.cursor)
    for event in result.asset_events or []:
        instance.report_runless_asset_event(event)
    launched = []
    for request in result.run_requests or []:
        if instance.get_runs_count(dg.RunsFilter(tags={{SENSOR_NAME_TAG: SENSOR, RUN_KEY_TAG: request.run_key}})):
            continue
        tags = {{**request.tags, SENSOR_NAME_TAG: SENSOR, RUN_KEY_TAG: request.run_key}}
        run = repo.get_job(request.job_name).execute_in_process(instance=instance, tags=tags, raise_on_error=False)
        launched.append({{"run_key": request.run_key, "success": run.success}})
    records = instance.fetch_materializations(PUBLISHED, limit=100).records
    published = sorted(str(r.asset_materialization.metadata["approval_id"].value) for r in records)
    verify = None
    if os.environ.get("GATED_VERIFY"):
        alone = dg.materialize([TARGET_DEF, *(defs.asset_checks or [])], instance=instance, resources=defs.resources,
                               selection=dg.AssetSelection.checks(CHECK), raise_on_error=False)
        [evaluation] = alone.get_asset_check_evaluations()
        publish = repo.get_implicit_global_asset_job_def().execute_in_process(
            instance=instance, asset_selection=[PUBLISHED], raise_on_error=False)
        failures = [str(e.event_specific_data.error.message) for e in publish.all_events if e.is_step_failure]
        verify = {{"check": {{"passed": evaluation.passed, "severity": evaluation.severity.value,
                             "description": evaluation.description}},
                  "published": publish.success, "refusal": " ".join(failures)}}
    print(json.dumps({{"check": check, "launched": launched, "published": published, "verify": verify}}, default=str))
"""


def _uv() -> str:
    uv = shutil.which("uv")
    if uv is None:
        pytest.fail("`uv` is not on PATH: the Makefile installs with it (see README, Install)", pytrace=False)
    return uv


def _run(args: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 300) -> str:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"{' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="session")
def runtime_ops_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of this checkout, built once per session from a copy of what a build reads (pyproject.toml, README
    and the package), so the build leaves nothing behind in the checkout."""
    source = tmp_path_factory.mktemp("runtime_ops_source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(CHECKOUT / name, source / name)
    shutil.copytree(CHECKOUT / "runtime_ops", source / "runtime_ops", ignore=shutil.ignore_patterns("__pycache__"))
    dist = tmp_path_factory.mktemp("dist")
    _run([_uv(), "build", "--wheel", "--quiet", "--out-dir", str(dist), str(source)], cwd=source, env=dict(os.environ))
    [wheel] = dist.glob("runtime_ops-*.whl")
    return wheel


class Project:
    """The other team's project folder and its venv; `run(...)` runs a command from that venv in the folder."""

    def __init__(self, root: Path, wheel: Path) -> None:
        self.root, self.venv = root, root / ".venv"
        package = root / "gated_project"
        (package / "defs" / "labels_gate").mkdir(parents=True)
        (root / "pyproject.toml").write_text(PYPROJECT)
        (package / "__init__.py").write_text("")
        (package / "definitions.py").write_text(DEFINITIONS)
        (package / "defs" / "__init__.py").write_text("")
        (package / "defs" / "assets.py").write_text(ASSETS)
        (package / "defs" / "labels_gate" / "defs.yaml").write_text(GATE_YAML)
        (root / "drive.py").write_text(DRIVER)
        (root.parent / "dagster_home").mkdir()
        (root / "pipelines").mkdir()  # no RetrievalPipeline of its own: the CLI and ops API serve its gates only
        self.env: dict[str, str] = {
            "PATH": f"{self.venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            "HOME": os.environ.get("HOME", str(root)),
            "VIRTUAL_ENV": str(self.venv),
            "DAGSTER_HOME": str(root.parent / "dagster_home"),
            "RUNTIME_OPS_HOME": str(root.parent / "runtime_ops_home"),
            # Unset, the CLI and ops API would also load the package's own demo pipeline (runtime_ops/defs).
            "RUNTIME_OPS_PIPELINES_DIR": str(root / "pipelines"),
            "LANG": "C.UTF-8",
        }
        uv_env = {**os.environ, "UV_COMPILE_BYTECODE": "0"}  # measured: compiling costs more than it saves here
        started = time.monotonic()
        _run([_uv(), "venv", "--quiet", "--python", sys.executable, str(self.venv)], cwd=root, env=uv_env)
        # The lock pins what the wheel depends on, so uv takes it all from its cache; [dev] brings `dg`.
        _run(
            [_uv(), "pip", "install", "--quiet", "--python", str(self.venv / "bin" / "python"),
             "-c", str(CHECKOUT / "requirements-dev.lock"), f"{wheel}[dev]", "-e", str(root)],
            cwd=root, env=uv_env,
        )  # fmt: skip
        self.install_seconds = time.monotonic() - started

    def run(self, *args: str, **env: str) -> str:
        return _run(list(args), cwd=self.root, env={**self.env, **env})

    def tick(self, **options: str) -> dict[str, Any]:
        """The driver's report: the check's latest result, what the sensor's tick launched, what is published
        (`options`: the driver's GATED_* settings)."""
        return json.loads(self.run(str(self.venv / "bin" / "python"), "drive.py", **options).splitlines()[-1])

    def refused(self, *args: str, **env: str) -> str:
        """A command of the venv that must fail; its output."""
        done = subprocess.run(list(args), cwd=self.root, env={**self.env, **env}, capture_output=True, text=True,
                              timeout=300, check=False)  # fmt: skip
        assert done.returncode != 0, f"{' '.join(args)} succeeded:\n{done.stdout}"
        return done.stdout + done.stderr

    def materialize(self, accuracy: float) -> dict[str, Any]:
        """The target with its check (`dagster asset materialize` exits 0: no failed run), then a tick."""
        self.run("dagster", "asset", "materialize", "-m", "gated_project.definitions",
                 "--select", "scoring/ticket_labels", GATED_ACCURACY=str(accuracy))  # fmt: skip
        return self.tick()


@pytest.fixture
def project(tmp_path: Path, runtime_ops_wheel: Path, postgres_url: str) -> Iterator[Project]:
    made = Project(tmp_path / "gated-project", runtime_ops_wheel)
    print(f"venv + wheel + project installed in {made.install_seconds:.1f} s")
    made.env["RUNTIME_OPS_DATABASE_URL"] = postgres_url
    yield made


def test_the_built_wheel_gates_an_asset_of_another_project_from_its_own_venv(project: Project) -> None:
    # Nothing of this checkout can leak in: the venv's runtime_ops is the installed wheel.
    where = project.run(str(project.venv / "bin" / "python"), "-c", "import runtime_ops; print(runtime_ops.__file__)")
    assert str(project.venv) in where and str(CHECKOUT) not in where

    assert "runtime_ops.components.ApprovalGate" in project.run("dg", "list", "components")
    assert "All definitions loaded successfully" in project.run("dg", "check", "defs")

    port = free_port()
    with SlackServer() as slack:
        project.env.update(
            SLACK_BOT_TOKEN="xoxb-test-token",
            SLACK_SIGNING_SECRET=SECRET,
            SLACK_APPROVAL_CHANNEL="C0DEFAULT",  # settings want a default; the gate's own slack_channel wins
            SLACK_API_URL=slack.base_url,
            SLACK_HOOKS_URL=slack.url,
            RUNTIME_OPS_PUBLIC_URL=f"http://127.0.0.1:{port}",
        )
        project.run("runtime-ops", "db", "upgrade")

        # Materializing the target leaves its check pending: a warning; the tick announces it, launches nothing.
        first = project.materialize(accuracy=0.85)
        assert (first["check"]["passed"], first["check"]["severity"], first["check"]["status"]) == (
            False, "WARN", "pending"), first  # fmt: skip
        assert (first["launched"], first["published"]) == ([], [])
        first_id = str(first["check"]["approval_id"])

        keys = {
            user: project.run("runtime-ops", "keys", "create", f"operator {user}", "--scope", "decide",
                              "--approver", user).splitlines()[0].strip()  # the key is printed first, once
            for user in ("U1", "U2", "U3")
        }  # fmt: skip
        log = project.root.parent / "serve.log"
        with log.open("w") as out:
            serve = subprocess.Popen(
                ["runtime-ops", "serve", "--host", "127.0.0.1", "--port", str(port)], cwd=project.root,
                env=project.env, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        try:
            api = f"http://127.0.0.1:{port}"
            ready = lambda: serve.poll() is None and web.get(f"{api}/healthz", timeout=1).status_code == 200  # noqa: E731
            wait_until(ready, 60, "runtime-ops serve", log=log)
            # U1's operator key approves the first request through the ops API: one approval of two launches
            # nothing; U2's, through the CLI, decides it.
            bearer = {"Authorization": f"Bearer {keys['U1']}"}
            approved = web.post(f"{api}/api/approvals/{first_id}/approve", json={}, headers=bearer, timeout=10)
            assert approved.status_code == 200, approved.text
            project.run("runtime-ops", "approvals", "approve", first_id, RUNTIME_OPS_OPERATOR_KEY=keys["U2"])
            assert project.tick()["launched"] == [{"run_key": first_id, "success": True}]

            # A signed Slack click (U2) and U1's signed link decide the second materialization's request.
            second = project.materialize(accuracy=0.86)
            second_id = str(second["check"]["approval_id"])
            assert second["check"]["status"] == "pending" and second_id != first_id
            assert (second["launched"], second["published"]) == ([], [first_id])
            [ts] = [ts for ts, m in slack.messages.items() if second_id in str(m)]
            body = interaction_body(
                second_id, "approve", "U2", message_ts=ts, action_ts="1700000000.000001",
                channel_id=CHANNEL, response_url=slack.response_url("click"),
            )  # fmt: skip
            headers = {"content-type": "application/x-www-form-urlencoded", **sign(SECRET, body, int(time.time()))}
            clicked = web.post(f"{api}/slack/interactions", content=body, headers=headers, timeout=10)
            assert clicked.status_code == 200, clicked.text
            assert project.tick()["launched"] == []  # one of two
            [text] = [e["text"] for e in slack.ephemerals if e["user"] == "U1" and second_id in e["text"]]
            link = text[text.index(f"{api}/approvals/") :].split()[0].rstrip(">")
            assert "Approve scoring/ticket_labels?" in web.get(link, timeout=10).text
            assert web.post(link, data={"action": "approve"}, timeout=10).status_code == 200
        finally:
            serve.terminate()
            serve.wait(timeout=30)
        assert SECRET not in log.read_text()
        assert project.tick()["launched"] == [{"run_key": second_id, "success": True}]
        # Exactly once per decision: another tick launches nothing, each request published once; the sensor
        # recorded the decision as the check's passed result on the latest materialization.
        last = project.tick()
        assert (last["launched"], last["published"]) == ([], sorted([first_id, second_id]))
        assert (last["check"]["passed"], last["check"]["approval_id"], last["check"]["decided_by"]) == (
            True, second_id, "U2, U1"), last  # fmt: skip

        # Four eyes: U3 launched the third materialization and may not approve it (the CLI refuses, naming why).
        third = project.tick(GATED_AS="U3", GATED_ACCURACY="0.87")
        third_id = str(third["check"]["approval_id"])
        assert third["check"]["status"] == "pending" and third_id not in (first_id, second_id), third
        said = project.refused("runtime-ops", "approvals", "approve", third_id, RUNTIME_OPS_OPERATOR_KEY=keys["U3"])
        assert "may not decide it (four eyes)" in said, said
        # Expiry fails closed: nobody else decides, a day later the tick expires the request; the check errors and
        # the downstream asset refuses; nothing more is published.
        expired = project.tick(GATED_HOURS_LATER="25", GATED_VERIFY="1")
        assert (expired["verify"]["check"]["passed"], expired["verify"]["check"]["severity"]) == (False, "ERROR")
        assert "was expired" in expired["verify"]["check"]["description"], expired
        assert not expired["verify"]["published"] and f"{third_id} is expired" in expired["verify"]["refusal"]
        assert (expired["launched"], expired["published"]) == ([], sorted([first_id, second_id]))

    project.run("runtime-ops", "audit", "anchor")
    assert "audit chain intact" in project.run("runtime-ops", "audit", "verify")
