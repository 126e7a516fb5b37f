"""The real Alertmanager (Debian's `prometheus-alertmanager`) for tests: one process on 127.0.0.1:free port, no
clustering, a fresh storage directory, routing every alert to one webhook receiver (the ops API's
`/alerts/alertmanager`) with group_wait 1s and group_interval 2s, so a notification arrives within seconds."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from runtime_ops_tests.support import web
from runtime_ops_tests.support.servers import MissingServerBinary, ServerStartError, free_port, wait_until

ALERTMANAGER = "/usr/bin/prometheus-alertmanager"
AMTOOL = "/usr/bin/amtool"
PACKAGE_HINT = (
    "the real Alertmanager is needed: install the Debian package prometheus-alertmanager "
    "(`apt-get install prometheus-alertmanager`, or `make system-packages`), which provides "
    f"{ALERTMANAGER} and {AMTOOL}"
)


class Alertmanager:
    """prometheus-alertmanager posting every alert to `webhook_url` (with `bearer_token` when given)."""

    def __init__(self, workdir: Path, webhook_url: str, bearer_token: str | None = None) -> None:
        for binary in (ALERTMANAGER, AMTOOL):
            if not Path(binary).is_file():
                raise MissingServerBinary(f"{binary} is missing: {PACKAGE_HINT}")
        self.workdir, self.webhook_url, self.token = workdir, webhook_url, bearer_token
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / "alertmanager.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def config(self) -> str:
        auth = (
            f"\n        http_config:\n          authorization:\n            credentials: {self.token}"
            if self.token
            else ""
        )
        return (
            "route:\n"
            "  receiver: runtime-ops\n"
            "  group_by: ['alertname']\n"
            "  group_wait: 1s\n"
            "  group_interval: 2s\n"
            "  repeat_interval: 1h\n"
            "receivers:\n"
            "  - name: runtime-ops\n"
            "    webhook_configs:\n"
            f"      - url: {self.webhook_url}\n"
            f"        send_resolved: true{auth}\n"
        )

    def start(self) -> Alertmanager:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "alertmanager.yml"
        config.write_text(self.config())
        storage = self.workdir / "data"
        storage.mkdir()
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [
                    ALERTMANAGER,
                    f"--config.file={config}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--cluster.listen-address=",
                    f"--storage.path={storage}",
                    "--log.level=debug",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )

        def ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise ServerStartError(f"alertmanager exited ({self.proc.returncode}):\n{self.log.read_text()[-3000:]}")
            return web.get(f"{self.url}/-/ready", timeout=1).status_code == 200

        wait_until(ready, 30, "alertmanager", self.log)
        return self

    def amtool(self, *args: str) -> str:
        proc = subprocess.run(
            [AMTOOL, f"--alertmanager.url={self.url}/", *args], capture_output=True, text=True, timeout=30
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout

    def alerts(self) -> list[dict[str, Any]]:
        return web.get(f"{self.url}/api/v2/alerts", timeout=5).json()

    def resolve(self, labels: dict[str, str], starts_at: str) -> None:
        """POST the alert again with an endsAt in the past: Alertmanager resolves it and notifies.

        `starts_at` must be at least as precise as the webhook's: Alertmanager merges the two and keeps the
        earlier startsAt, and its own API shows startsAt to the millisecond only (which would be a new key).
        """
        ended = (datetime.now(UTC) - timedelta(milliseconds=500)).isoformat().replace("+00:00", "Z")
        body = [{"labels": labels, "startsAt": starts_at, "endsAt": ended}]
        assert web.post(f"{self.url}/api/v2/alerts", json=body, timeout=5).status_code == 200

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None
