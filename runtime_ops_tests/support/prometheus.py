"""A throwaway Prometheus server (Debian's `prometheus` package) for tests, and the real rule file on a faster clock.

`PrometheusServer` scrapes one target's /metrics with a bearer key every second, evaluates a rule file every
second and sends its alerts to one Alertmanager: the deployment's `docker/prometheus/prometheus.yml` in
miniature. `scaled_rules` makes the test's copy of `docker/prometheus/rules.yml`: every duration of it (range
windows, `offset`s, `for:`) divided by one factor, nothing else changed, so the chain test runs the real
expressions and thresholds on a clock that is `factor` times faster (30m -> 15s at 120).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from runtime_ops_tests.support import web
from runtime_ops_tests.support.servers import MissingServerBinary, ServerStartError, free_port, wait_until

PROMETHEUS = "/usr/bin/prometheus"
PACKAGE_HINT = (
    f"the real Prometheus server is needed: install the Debian package prometheus (`apt-get install prometheus`, "
    f"or `make system-packages`), which provides {PROMETHEUS}"
)

_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000, "y": 31_536_000_000}
_DURATION = re.compile(r"\b(?:\d+(?:ms|[smhdwy]))+\b")
_PART = re.compile(r"(\d+)(ms|[smhdwy])")
_RANGE = re.compile(r"\[[^\]]+\]")
_OFFSET = re.compile(r"\boffset\s+(?:\d+(?:ms|[smhdwy]))+")
_FOR = re.compile(r"^([ \t]*for:[ \t]*)(\S+)[ \t]*$", re.MULTILINE)


def duration_ms(text: str) -> int:
    """A Prometheus duration (`1h30m`, `15s`, `250ms`) in milliseconds."""
    if not _DURATION.fullmatch(text):
        raise ValueError(f"not a Prometheus duration: {text!r}")
    return sum(int(n) * _UNIT_MS[unit] for n, unit in _PART.findall(text))


def _scaled(text: str, factor: int) -> str:
    ms = duration_ms(text) // factor
    if ms <= 0:
        raise ValueError(f"{text} divided by {factor} is below a millisecond")
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def scaled_rules(rules: str, factor: int) -> str:
    """`rules` (a Prometheus rule file) with each duration of a range, an `offset` or a `for:` divided by `factor`."""

    def durations(match: re.Match[str]) -> str:
        return _DURATION.sub(lambda d: _scaled(d.group(0), factor), match.group(0))

    text = _RANGE.sub(durations, rules)
    text = _OFFSET.sub(durations, text)
    return _FOR.sub(lambda m: m.group(1) + _scaled(m.group(2), factor), text)


class PrometheusServer:
    """prometheus on 127.0.0.1:free port with a fresh TSDB: scrape and evaluation every second; stop() ends it."""

    def __init__(
        self, workdir: Path, *, target: str, bearer_key: str, rules: Path, alertmanager: str | None = None
    ) -> None:
        if not Path(PROMETHEUS).is_file():
            raise MissingServerBinary(f"{PROMETHEUS} is missing: {PACKAGE_HINT}")
        self.workdir, self.target, self.rules, self.alertmanager = workdir, target, rules, alertmanager
        self.bearer_key = bearer_key
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / "prometheus.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def config(self, key_file: Path) -> dict[str, Any]:
        config: dict[str, Any] = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(self.rules)],
            "scrape_configs": [
                {
                    "job_name": "runtime_ops",
                    "metrics_path": "/metrics",
                    "scrape_timeout": "1s",
                    "honor_labels": True,  # as docker/prometheus/prometheus.yml: the Dagster job label is kept
                    # The key in a file, as the deployment mounts it: never in the config itself.
                    "authorization": {"type": "Bearer", "credentials_file": str(key_file)},
                    "static_configs": [{"targets": [self.target]}],
                }
            ],
        }
        if self.alertmanager:
            config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [self.alertmanager]}]}]}
        return config

    def start(self) -> PrometheusServer:
        self.workdir.mkdir(parents=True, exist_ok=True)
        key_file = self.workdir / "ops_api_read_key"
        key_file.write_text(self.bearer_key)
        key_file.chmod(0o600)
        config = self.workdir / "prometheus.yml"
        config.write_text(yaml.safe_dump(self.config(key_file), sort_keys=False))
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [
                    PROMETHEUS,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={self.workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--log.level=debug",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )

        def ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise ServerStartError(f"prometheus exited ({self.proc.returncode}):\n{self.log.read_text()[-3000:]}")
            return web.get(f"{self.url}/-/ready", timeout=1).status_code == 200

        wait_until(ready, 30, "prometheus", self.log)
        return self

    def _api(self, path: str, **params: str) -> Any:
        reply = web.get(f"{self.url}/api/v1/{path}", params=params, timeout=5)
        reply.raise_for_status()
        body = reply.json()
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's samples: `[{"metric": {...}, "value": [time, "value"]}, ...]`."""
        return self._api("query", query=expr)["result"]

    def alerts(self) -> list[dict[str, Any]]:
        """The alerts of the rules, pending and firing (`state`, `labels`, `annotations`, `activeAt`, `value`)."""
        return self._api("alerts")["alerts"]

    def targets(self) -> list[dict[str, Any]]:
        return self._api("targets")["activeTargets"]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None
