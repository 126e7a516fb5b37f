"""The docker/ deployment, checked without a Docker engine.

- `docker-compose config` renders the compose file (with dummy secrets) and refuses to when a secret is missing;
  every service docs/deploy.md names is in it, every dependency waits on a health or completion condition, every
  command parses with the real CLI it runs, and the runtime environment is a valid `Settings`.
- The Dockerfile installs the package with the Makefile's two install commands (`make install`, as docs/deploy.md says).
- docker/dagster.yaml loads with Dagster's own instance schema and, on the real PostgreSQL and S3 (moto) test
  servers, becomes an instance with Postgres storage, the QueuedRunCoordinator and its limits (runs, and pools at
  run granularity), run monitoring and run retries. dagster-docker is not installed locally, so the
  DockerRunLauncher's config is checked against the real schema when it is importable and against a copy of
  dagster-docker 0.29.27's schema otherwise.
- `promtool check config` / `promtool test rules` pass, the rule tests can fail, and every metric named by the
  rules and the Grafana dashboard is in the metric contract.

docker-compose and promtool are system packages `make install` provides; a missing one fails these tests.
"""

import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from runtime_ops_tests.support.servers import require_binary

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
COMPOSE_FILE = DOCKER / "docker-compose.yaml"
PROMETHEUS = DOCKER / "prometheus"
DASHBOARD = DOCKER / "grafana" / "dashboards" / "runtime_ops.json"

# Dummy values for the compose file's required variables (`${VAR:?}`); nothing is started with them.
COMPOSE_SECRETS = {
    "POSTGRES_PASSWORD": "pg-secret",
    "REDIS_PASSWORD": "redis-secret",
    "MINIO_ROOT_PASSWORD": "minio-secret",
    "RUNTIME_OPS_LINK_SECRET": "link-secret",
    "GRAFANA_ADMIN_PASSWORD": "grafana-secret",
    "RUNTIME_OPS_AUDIT_KEY": "audit-key",
    # Not secrets, but no safe default: without approvers anyone could approve, without a token anyone alert.
    "RUNTIME_OPS_APPROVERS": "U024BE7LH",
    "RUNTIME_OPS_ALERT_TOKEN": "alert-token",
}

# The services issue 6 asks for, by their compose names (docs/deploy.md's table must name the same ones).
REQUIRED_SERVICES = {
    "postgres",
    "redis",
    "minio",
    "code-server",
    "dagster-webserver",
    "dagster-daemon",
    "ops-api",
    "prometheus",
    "grafana",
}

# Services running runtime_ops or Dagster code from the image; they share one environment.
RUNTIME_SERVICES = ("migrate", "code-server", "dagster-webserver", "dagster-daemon", "ops-api")

# Environment variables of the runtime services that are not runtime_ops settings: Dagster's storage (read by
# docker/dagster.yaml), the AWS SDK's and OpenTelemetry's standard variables, and the code server's image.
NON_SETTINGS_ENV = {
    "DAGSTER_PG_HOST",
    "DAGSTER_PG_PORT",
    "DAGSTER_PG_USER",
    "DAGSTER_PG_PASSWORD",
    "DAGSTER_PG_DB",
    "DAGSTER_COMPUTE_LOG_BUCKET",
    "DAGSTER_CURRENT_IMAGE",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_DEFAULT_REGION",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_SERVICE_NAME",
}

# dagster-docker 0.29.27's DockerRunLauncher.config_type() (dagster_docker/utils.py DOCKER_CONFIG_SCHEMA merged
# with container_context.py DOCKER_CONTAINER_CONTEXT_SCHEMA), used only when dagster_docker is not importable here.
# It is installed in the image only (docker/Dockerfile), so this copy is what a local run can check against.
DOCKER_LAUNCHER_FIELDS_0_29_27 = ("image", "network", "registry", "env_vars", "container_kwargs", "networks")


def _require(tool: str, package: str) -> str:
    return require_binary(tool, package)


def _run(args: list[str], env: Mapping[str, str] | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=cwd, env=dict(env) if env is not None else None, capture_output=True, text=True, timeout=120
    )


def _compose_env(**overrides: str) -> dict[str, str]:
    """A clean environment: PATH/HOME only, so a developer's own POSTGRES_PASSWORD etc. cannot mask a mistake."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp")}
    env.update(COMPOSE_SECRETS)
    env.update(overrides)
    return env


def _compose_config(env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    docker_compose = _require("docker-compose", "docker-compose")
    # An empty --env-file instead of docker/.env, so a developer's own secrets cannot supply a value the test
    # means to leave out.
    with tempfile.TemporaryDirectory() as tmp:
        empty = Path(tmp) / "empty.env"
        empty.write_text("")
        return _run([docker_compose, "-f", str(COMPOSE_FILE), "--env-file", str(empty), "config"], env=env)


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    result = _compose_config(_compose_env())
    assert result.returncode == 0, f"docker-compose config failed:\n{result.stderr}"
    return yaml.safe_load(result.stdout)


@pytest.fixture(scope="module")
def raw_compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE_FILE.read_text())


@pytest.fixture(scope="module")
def instance_yaml() -> dict[str, Any]:
    return yaml.safe_load((DOCKER / "dagster.yaml").read_text())


def _deploy_page_section(title: str) -> str:
    text = (ROOT / "docs" / "deploy.md").read_text()
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
    assert match, f"docs/deploy.md has no '## {title}' section"
    return match.group(1)


# --- compose -------------------------------------------------------------------------------------------------


def test_compose_config_renders_every_service_the_readme_names(compose: dict[str, Any]) -> None:
    services = set(compose["services"])
    assert services >= REQUIRED_SERVICES, f"missing from compose: {REQUIRED_SERVICES - services}"
    # docs/deploy.md's services table: first column is the compose service name in backticks.
    named = set(re.findall(r"^\| `([a-z0-9-]+)` \|", _deploy_page_section("Deploy with Docker"), flags=re.M))
    assert named >= REQUIRED_SERVICES, f"docs/deploy.md's services table misses {REQUIRED_SERVICES - named}"
    assert named == services, (
        f"docs/deploy.md names {named - services or '-'} not in compose; not in docs/deploy.md: {services - named}"
    )


def test_compose_refuses_to_render_without_a_secret() -> None:
    env = _compose_env()
    del env["POSTGRES_PASSWORD"]
    result = _compose_config(env)
    assert result.returncode != 0
    assert "POSTGRES_PASSWORD" in result.stderr, result.stderr


def test_env_example_documents_every_variable_and_satisfies_no_secret() -> None:
    compose_text = "\n".join(ln for ln in COMPOSE_FILE.read_text().splitlines() if not ln.lstrip().startswith("#"))
    required = set(re.findall(r"\$\{(\w+):\?", compose_text))
    optional = set(re.findall(r"\$\{(\w+):-", compose_text))
    assert required == set(COMPOSE_SECRETS), required ^ set(COMPOSE_SECRETS)
    example = (DOCKER / ".env.example").read_text()
    set_lines = dict(re.findall(r"^(\w+)=(.*)$", example, flags=re.M))
    documented = set(set_lines) | set(re.findall(r"^# (\w+)=", example, flags=re.M))
    assert required <= set(set_lines), f"secrets not in docker/.env.example: {required - set(set_lines)}"
    assert optional <= documented, f"variables not in docker/.env.example: {sorted(optional - documented)}"
    # Copied unchanged, the example leaves every secret empty: compose must refuse it rather than run without.
    assert all(value == "" for key, value in set_lines.items() if key in required)
    docker_compose = _require("docker-compose", "docker-compose")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp")}
    result = _run(
        [docker_compose, "-f", str(COMPOSE_FILE), "--env-file", str(DOCKER / ".env.example"), "config"], env=env
    )
    assert result.returncode != 0 and any(name in result.stderr for name in required), result.stderr


def test_every_dependency_waits_for_health_or_completion(compose: dict[str, Any]) -> None:
    services = compose["services"]
    one_shots = {"minio-init", "migrate"}
    for name, svc in services.items():
        for dep, spec in (svc.get("depends_on") or {}).items():
            condition = spec.get("condition")
            if dep in one_shots:
                assert condition == "service_completed_successfully", (name, dep, condition)
                assert services[dep].get("restart") == "no", dep
            else:
                assert condition == "service_healthy", (name, dep, condition)
                assert "healthcheck" in services[dep], f"{name} waits for {dep}'s health, which has no healthcheck"
        if name not in one_shots:
            assert "healthcheck" in svc, f"{name} has no healthcheck"
            assert svc.get("restart") == "unless-stopped", name


def test_runs_join_the_network_the_run_launcher_names(compose: dict[str, Any], instance_yaml: dict[str, Any]) -> None:
    network = instance_yaml["run_launcher"]["config"]["network"]
    assert {n["name"] for n in compose["networks"].values()} == {network}
    for name in RUNTIME_SERVICES:
        assert list(compose["services"][name]["networks"]) == ["runtime_ops"], name
    # The launcher needs the Docker API: the daemon launches runs, the webserver terminates them.
    for name in ("dagster-daemon", "dagster-webserver"):
        assert any(v.startswith("/var/run/docker.sock:") for v in _volume_strings(compose["services"][name])), name


def _volume_strings(svc: dict[str, Any]) -> list[str]:
    out = []
    for v in svc.get("volumes", []):
        out.append(v if isinstance(v, str) else f"{v.get('source')}:{v.get('target')}")
    return out


def _command(svc: dict[str, Any]) -> list[str]:
    cmd = svc["command"]
    return shlex.split(cmd) if isinstance(cmd, str) else [str(c) for c in cmd]


def _click_parse(group: Any, argv: list[str]) -> Any:
    """Resolve `argv` through a click group to its command and parse the options exactly as the CLI would,
    without running it (an unknown option or a bad value raises)."""
    import click

    cmd, args = group, list(argv)
    while isinstance(cmd, click.Group):
        ctx = click.Context(cmd)
        sub = cmd.get_command(ctx, args[0])
        assert sub is not None, f"no command {args[0]!r} in {cmd.name}"
        cmd, args = sub, args[1:]
    return cmd.make_context(cmd.name or "cmd", args)


def test_every_command_parses_with_the_cli_it_runs(compose: dict[str, Any]) -> None:
    from dagster._cli import cli as dagster_cli
    from dagster._daemon.cli import create_dagster_daemon_cli
    from dagster_webserver.cli import create_dagster_webserver_cli

    from runtime_ops.cli import build_parser

    clis = {
        "dagster": dagster_cli,
        "dagster-daemon": create_dagster_daemon_cli(),
        "dagster-webserver": create_dagster_webserver_cli(),
    }
    checked = 0
    for svc in compose["services"].values():
        commands: list[list[str]] = []
        if svc.get("image", "").startswith("runtime-ops"):
            commands.append(_command(svc))
            test = svc.get("healthcheck", {}).get("test", [])
            if test and test[0] == "CMD" and test[1] in (*clis, "runtime-ops"):
                commands.append(test[1:])
        # A file the command names inside the container must be bind-mounted there: read it from its source.
        mounts = {target: source for source, target in (v.split(":")[:2] for v in _volume_strings(svc))}
        for argv in commands:
            argv = [mounts.get(arg, arg) for arg in argv]
            if argv[0] == "runtime-ops":
                build_parser().parse_args(argv[1:])  # SystemExit on a bad flag
            else:
                _click_parse(clis[argv[0]], argv[1:])
            checked += 1
    assert checked == 7  # 5 runtime commands + the code server's and the daemon's health checks


def test_code_server_serves_the_definitions_under_the_workspace_location_name(compose: dict[str, Any]) -> None:
    import importlib

    import dagster as dg
    from dagster._cli import cli as dagster_cli

    argv = _command(compose["services"]["code-server"])
    params = _click_parse(dagster_cli, argv[1:]).params
    module = importlib.import_module(params["module_name"])
    assert isinstance(getattr(module, params["attribute"]), dg.Definitions)

    docker_ws = yaml.safe_load((DOCKER / "workspace.yaml").read_text())["load_from"][0]["grpc_server"]
    local_ws = yaml.safe_load((ROOT / "workspace.yaml").read_text())["load_from"][0]["python_module"]
    # Same location name as `make dev`, so schedule/sensor state and asset history read the same in both.
    assert params["location_name"] == docker_ws["location_name"] == local_ws["location_name"]
    assert docker_ws["host"] == "code-server" and docker_ws["port"] == params["port"]
    assert (
        compose["services"]["code-server"]["environment"]["DAGSTER_CURRENT_IMAGE"]
        == compose["services"]["code-server"]["image"]
    )


def test_workspace_yaml_loads_with_dagsters_schema() -> None:
    from dagster._core.workspace.config_schema import ensure_workspace_config

    ensure_workspace_config(yaml.safe_load((DOCKER / "workspace.yaml").read_text()), str(DOCKER / "workspace.yaml"))


def _settings_aliases() -> set[str]:
    from runtime_ops.settings import Settings

    names = set()
    for field in Settings.model_fields.values():
        alias = field.validation_alias
        names.update(getattr(alias, "choices", None) or ([alias] if alias else []))
    return {n for n in names if isinstance(n, str)}


def test_runtime_services_share_one_environment_of_known_variables(compose: dict[str, Any]) -> None:
    envs = {name: dict(compose["services"][name]["environment"]) for name in RUNTIME_SERVICES}
    base = envs["migrate"]
    for name, env in envs.items():
        extra = set(env) - set(base)
        assert extra <= {"DAGSTER_CURRENT_IMAGE"}, (name, extra)
        assert {k: env[k] for k in base} == base, name
    unknown = set(base) - _settings_aliases() - NON_SETTINGS_ENV
    assert not unknown, f"not a runtime_ops setting nor a known external variable (typo?): {sorted(unknown)}"


def test_runtime_environment_is_valid_settings(compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import timedelta

    from runtime_ops.settings import Settings

    for name in _settings_aliases():
        monkeypatch.delenv(name, raising=False)
    for key, value in compose["services"]["code-server"]["environment"].items():
        monkeypatch.setenv(key, str(value))
    s = Settings()
    db = urlsplit(s.resolved_database_url)
    assert (db.scheme, db.hostname, db.port, db.path) == ("postgresql", "postgres", 5432, "/runtime_ops")
    assert s.redis_url == "redis://:redis-secret@redis:6379/0"
    assert s.resolved_landing == "s3://runtime-ops/incoming" and s.aws_endpoint_url == "http://minio:9000"
    assert s.resolved_link_secret() == "link-secret"
    # Empty optional integrations mean "off", not an empty credential; deadlines keep their defaults.
    assert not s.slack_bot_token and not s.model_endpoint and not s.webhook_secret
    # Required: approvers (the API refuses a public URL without them) and the alert webhook's token.
    assert s.approvers == ("U024BE7LH",) and s.alert_token is not None and not s.alert_open
    assert (s.escalate_after, s.expire_after) == (timedelta(hours=4), timedelta(hours=24))
    assert s.required_approvals == 1 and s.log_format == "json"


def test_run_containers_get_the_whole_runtime_environment(
    compose: dict[str, Any], instance_yaml: dict[str, Any]
) -> None:
    forwarded = instance_yaml["run_launcher"]["config"]["env_vars"]
    assert len(forwarded) == len(set(forwarded))
    expected = set(compose["services"]["dagster-daemon"]["environment"])
    assert set(forwarded) == expected, (
        f"dagster.yaml env_vars vs the daemon's environment: missing {sorted(expected - set(forwarded))}, "
        f"extra {sorted(set(forwarded) - expected)}"
    )
    # Every `env:` the instance config reads is set in the processes that load it.
    referenced = set(re.findall(r"env: (\w+)", (DOCKER / "dagster.yaml").read_text()))
    assert referenced and referenced <= expected, referenced - expected


def test_prometheus_and_grafana_point_at_compose_services(compose: dict[str, Any]) -> None:
    prom = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())
    job = next(j for j in prom["scrape_configs"] if j["job_name"] == "runtime_ops")
    assert job["metrics_path"] == "/metrics" and job["honor_labels"] is True
    host, port = job["static_configs"][0]["targets"][0].split(":")
    ops_cmd = _command(compose["services"][host])
    assert ops_cmd[:2] == ["runtime-ops", "serve"] and ops_cmd[ops_cmd.index("--port") + 1] == port
    # Prometheus resolves rule_files next to its config: both are mounted into the same folder.
    mounts = {v.split(":")[1] for v in _volume_strings(compose["services"]["prometheus"])}
    assert {"/etc/prometheus/prometheus.yml", "/etc/prometheus/rules.yml"} <= mounts
    assert prom["rule_files"] == ["rules.yml"]

    ds = yaml.safe_load((DOCKER / "grafana/provisioning/datasources/prometheus.yaml").read_text())["datasources"][0]
    assert urlsplit(ds["url"]).hostname == "prometheus" and "prometheus" in compose["services"]
    uids = {p["datasource"]["uid"] for p in _panels(json.loads(DASHBOARD.read_text()))}
    assert uids == {ds["uid"]}


# --- image ---------------------------------------------------------------------------------------------------


def _normalise_install(command: str) -> str:
    """`$(UV) pip sync --python $(PY) requirements.lock` and `uv pip sync --python /opt/venv/bin/python
    requirements.lock` are the same command: only the uv launcher and the target interpreter differ."""
    command = command.replace("$(UV)", "uv")
    command = re.sub(r"--python \S+", "--python PY", command)
    return " ".join(command.split())


def _makefile_install_commands() -> list[str]:
    text = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^\$\(STAMP\):.*?\n((?:\t.*\n)+)", text, flags=re.M)
    assert recipe, "Makefile has no $(STAMP) recipe"
    lines = [ln.strip().lstrip("@") for ln in recipe.group(1).splitlines()]
    return [_normalise_install(ln) for ln in lines if re.match(r"\$\(UV\) pip (sync|install)", ln)]


def _dockerfile_instructions() -> list[tuple[str, str]]:
    text = (DOCKER / "Dockerfile").read_text()
    text = re.sub(r"\\\n", " ", text)  # continuation lines
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile_installs_the_package_the_way_make_install_does() -> None:
    make = _makefile_install_commands()
    assert len(make) == 2 and "pip sync" in make[0] and "--no-deps -e ." in make[1], make

    instructions = _dockerfile_instructions()
    assert instructions[0][0] == "FROM" and re.fullmatch(r"python:3\.11-slim(-\w+)?", instructions[0][1])
    runs = [
        (i, _normalise_install(part))
        for i, (word, rest) in enumerate(instructions)
        if word == "RUN"
        for part in rest.split("&&")
    ]
    positions = []
    for cmd in make:
        hits = [i for i, run in runs if run == cmd]
        assert hits, f"the Dockerfile does not run `{cmd}` (the Makefile's install step)"
        positions.append(hits[0])
    assert positions == sorted(positions), "the Dockerfile installs in another order than the Makefile"

    copied = {i: rest for i, (word, rest) in enumerate(instructions) if word == "COPY"}
    sources = " ".join(rest for i, rest in copied.items() if i < positions[1])
    for needed in ("requirements.lock", "pyproject.toml", "README.md", "runtime_ops"):
        assert needed in sources, f"{needed} is not in the image before `pip install -e .`"
    for path in re.findall(r"(?:^|\s)([\w./-]+)(?=\s)", " ".join(copied.values())):
        if not path.startswith("/") and not path.startswith("--"):
            assert (ROOT / path).exists(), f"COPY {path}: no such path in the build context"

    # docs/deploy.md's install instructions name the same commands.
    docker_section = _deploy_page_section("Deploy with Docker")
    assert "make install" in docker_section
    for cmd in make:
        assert cmd.replace("--python PY ", "") in _normalise_install(docker_section).replace("--python PY ", ""), cmd


def test_dagster_docker_is_the_release_line_of_dagster() -> None:
    lock = (ROOT / "requirements.lock").read_text()
    dagster = re.search(r"^dagster==(\S+)", lock, flags=re.M).group(1)
    integrations = re.search(r"^dagster-postgres==(\S+)", lock, flags=re.M).group(1)
    pins = re.findall(r"dagster-docker==(\S+)", (DOCKER / "Dockerfile").read_text())
    assert pins == [integrations], (pins, integrations)
    assert dagster.split(".")[1:] == ["13", "27"] and integrations == "0.29.27"


def test_the_image_lock_holds_only_what_the_processes_run() -> None:
    """`dg` (dagster-dg-cli) is `make dev`'s (requirements-dev.lock), not the image's: requirements.lock, all the
    image installs, has neither it nor what it brings along; nor pgvector's Python package, which nothing imports."""
    pins = set(re.findall(r"^([A-Za-z0-9_.\-]+)==", (ROOT / "requirements.lock").read_text(), flags=re.M))
    assert not {"dagster-dg-cli", "dagster-dg-core", "gitpython", "github3-py", "questionary", "pgvector"} & pins
    assert "dagster-dg-cli" in (ROOT / "requirements-dev.lock").read_text()


def test_dockerignore_keeps_local_state_out_of_the_image() -> None:
    ignored = {ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines() if ln and not ln.startswith("#")}
    assert {".git", ".venv", ".runtime_ops", "**/__pycache__", "docker/.env"} <= ignored
    assert not {"runtime_ops", "requirements.lock", "pyproject.toml", "README.md", "docker"} & ignored


# --- dagster.yaml --------------------------------------------------------------------------------------------


def test_dagsters_postgres_connections_give_up_on_a_server_that_never_answers(instance_yaml: dict[str, Any]) -> None:
    """A connection that gets no answer must fail (Dagster retries it) rather than hold a daemon thread until TCP
    gives up: the soak saw the event log consumer wait > 10 min behind a proxy that accepted and never forwarded.
    integration/test_tcp_proxy.py shows connect_timeout ending exactly that wait."""
    helm = yaml.safe_load((ROOT / "deploy" / "k8s" / "values.yaml").read_text())["postgresql"]["postgresqlParams"]
    for where, params in (("docker/dagster.yaml", instance_yaml["storage"]["postgres"]["postgres_db"]["params"]),
                          ("deploy/k8s/values.yaml", helm)):  # fmt: skip
        assert 0 < int(params["connect_timeout"]) <= 30, where
        assert int(params["keepalives_idle"]) <= 60 and int(params["keepalives_count"]) >= 1, where


def test_dagster_yaml_passes_dagsters_instance_schema(tmp_path: Path, instance_yaml: dict[str, Any]) -> None:
    from dagster._config import validate_config
    from dagster._core.instance.config import dagster_instance_config
    from dagster._core.run_coordinator import QueuedRunCoordinator
    from dagster_aws.s3.compute_log_manager import S3ComputeLogManager

    shutil.copyfile(DOCKER / "dagster.yaml", tmp_path / "dagster.yaml")
    config, custom_class = dagster_instance_config(str(tmp_path))
    assert custom_class is None
    assert set(config["storage"]) == {"postgres"}
    assert config["run_monitoring"]["enabled"] and config["run_retries"]["enabled"]

    # The configurable classes' own schemas (the instance schema takes their config as Permissive).
    coordinator = instance_yaml["run_coordinator"]
    assert (coordinator["module"], coordinator["class"]) == ("dagster._core.run_coordinator", "QueuedRunCoordinator")
    assert validate_config(QueuedRunCoordinator.config_type(), coordinator["config"]).success
    compute_logs = instance_yaml["compute_logs"]
    assert compute_logs["class"] == S3ComputeLogManager.__name__
    assert validate_config(S3ComputeLogManager.config_type(), compute_logs["config"]).success

    launcher = instance_yaml["run_launcher"]
    assert (launcher["module"], launcher["class"]) == ("dagster_docker", "DockerRunLauncher")
    _check_docker_launcher_config(launcher["config"])


def _check_docker_launcher_config(config: dict[str, Any]) -> None:
    try:
        from dagster_docker import DockerRunLauncher  # pyright: ignore[reportMissingImports]  # image only
    except ImportError:  # the local venv: dagster-docker is installed in the image only
        assert set(config) <= set(DOCKER_LAUNCHER_FIELDS_0_29_27), set(config) - set(DOCKER_LAUNCHER_FIELDS_0_29_27)
        assert isinstance(config["env_vars"], list) and all(isinstance(v, str) for v in config["env_vars"])
        assert isinstance(config["network"], str)
    else:
        from dagster._config import validate_config

        assert validate_config(DockerRunLauncher.config_type(), config).success
    # dagster_docker.utils.validate_docker_config's rules, which it applies when the launcher is created.
    assert not (config.get("network") and config.get("networks"))
    assert not {"image", "environment", "network"} & set(config.get("container_kwargs", {}))


@pytest.fixture
def docker_instance_env(
    postgres_url: str, s3_bucket: tuple[Any, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[Path]:
    """DAGSTER_HOME holding docker/dagster.yaml, with the compose variables pointing at the test servers."""
    url = urlsplit(postgres_url.replace("postgresql+psycopg2", "postgresql"))
    _, bucket = s3_bucket
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copyfile(DOCKER / "dagster.yaml", home / "dagster.yaml")
    env = {
        "DAGSTER_HOME": str(home),
        "DAGSTER_PG_HOST": url.hostname or "",
        "DAGSTER_PG_PORT": str(url.port),
        "DAGSTER_PG_USER": url.username or "",
        "DAGSTER_PG_PASSWORD": url.password or "",
        "DAGSTER_PG_DB": url.path.lstrip("/"),
        "DAGSTER_COMPUTE_LOG_BUCKET": bucket,
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    yield home


def test_dagster_yaml_makes_a_working_instance_on_postgres_and_s3(docker_instance_env: Path) -> None:
    import dagster as dg
    from dagster._core.instance.config import PoolGranularity
    from dagster._core.run_coordinator import QueuedRunCoordinator
    from dagster_aws.s3.compute_log_manager import S3ComputeLogManager
    from dagster_postgres import PostgresRunStorage

    with dg.DagsterInstance.get() as instance:
        assert isinstance(instance.run_storage, PostgresRunStorage)
        run = instance.create_run_for_job(job_def=_noop_job(), run_id=None)
        assert instance.get_run_by_id(run.run_id) is not None  # written to and read from PostgreSQL

        assert isinstance(instance.run_coordinator, QueuedRunCoordinator)
        queue = instance.get_concurrency_config().run_queue_config
        assert queue is not None and queue.max_concurrent_runs == 8
        limits = {lim["key"]: (lim.get("value"), lim["limit"]) for lim in queue.tag_concurrency_limits}
        assert limits["runtime_ops/lifecycle"] == ({"applyLimitPerUniqueValue": True}, 1)
        assert limits["runtime_ops/ingest"] == ({"applyLimitPerUniqueValue": True}, 4)
        # Backfill partitions wait in the queue for a pool slot, not in a started container; a pool nobody set a
        # limit for (a pipeline's lifecycle pool) admits one run at a time.
        pools = instance.get_concurrency_config().pool_config
        assert pools.pool_granularity == PoolGranularity.RUN and pools.default_pool_limit == 1
        assert instance.run_monitoring_enabled and instance.run_retries_enabled
        assert instance.run_retries_max_retries == 2
        # Only runs whose worker died are retried: a refused promotion launched from the UI stays one run.
        assert instance.run_retries_retry_on_asset_or_op_failure is False

        assert isinstance(instance.compute_log_manager, S3ComputeLogManager)

        try:
            import dagster_docker  # noqa: F401  # pyright: ignore[reportMissingImports]  # image only
        except ImportError:
            # Not installed here (image only): the instance names it, and only touching the launcher needs it.
            with pytest.raises(Exception, match="import module dagster_docker"):
                _ = instance.run_launcher
        else:
            assert type(instance.run_launcher).__name__ == "DockerRunLauncher"


def _noop_job() -> Any:
    import dagster as dg

    @dg.op
    def noop() -> None:
        return None

    @dg.job
    def docker_deploy_probe() -> None:
        noop()

    return docker_deploy_probe


def test_tag_limits_name_real_jobs(instance_yaml: dict[str, Any]) -> None:
    from runtime_ops.definitions import defs

    jobs = {job.name: job.tags for job in defs.resolve_all_job_defs()}
    for limit in instance_yaml["concurrency"]["runs"]["tag_concurrency_limits"]:
        tagged = {name for name, tags in jobs.items() if limit["key"] in tags}
        assert tagged, f"tag limit on {limit['key']!r}, which no job carries"
    lifecycle = {name for name, tags in jobs.items() if tags.get("runtime_ops/lifecycle") == "demo"}
    assert lifecycle >= {f"demo__{j}" for j in ("train_job", "promotion_job", "rollback_job", "reembed_job")}


def test_pool_settings_cover_the_backfill_and_lifecycle_pools() -> None:
    """dagster.yaml names no pool: its default limit (1) is each pipeline's lifecycle pool's; the embedding pool,
    the only other pool a step names, is raised with `dagster instance concurrency set`."""
    from runtime_ops.definitions import defs
    from runtime_ops.pipeline.spec import BackfillSpec

    pools = {
        assets.get_op_def_for_asset_key(key).pool
        for assets in defs.resolve_asset_graph().assets_defs
        for key in assets.keys
        if assets.is_executable
    }
    assert pools - {None} == {BackfillSpec().pool, "demo__lifecycle"}


# --- Prometheus ----------------------------------------------------------------------------------------------


# The rule tests: runtime_ops' own health, and live quality (a day of history, evaluated every 5 minutes).
RULE_TESTS = ("rules_test.yml", "rules_live_quality_test.yml")


def _promtool() -> str:
    return _require("promtool", "prometheus")


def test_promtool_checks_the_prometheus_config(tmp_path: Path, compose: dict[str, Any]) -> None:
    # The scrape key is a compose secret mounted at /run/secrets/<name>: checked here with a stand-in file there.
    prom = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())
    job = next(j for j in prom["scrape_configs"] if j["job_name"] == "runtime_ops")
    secret = Path(job["authorization"]["credentials_file"])
    assert job["authorization"]["type"] == "Bearer" and secret.parent == Path("/run/secrets")
    mounted = [m["source"] if isinstance(m, dict) else m for m in compose["services"]["prometheus"]["secrets"]]
    assert secret.name in mounted and secret.name in compose["secrets"]
    stand_in = tmp_path / secret.name
    stand_in.write_text("rok_00000000_stand-in")
    job["authorization"]["credentials_file"] = str(stand_in)
    shutil.copy(PROMETHEUS / "rules.yml", tmp_path / "rules.yml")
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(prom))
    result = _run([_promtool(), "check", "config", "prometheus.yml"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout + result.stderr


def test_alert_rules_pass_their_promtool_unit_tests() -> None:
    result = _run([_promtool(), "test", "rules", *RULE_TESTS], cwd=PROMETHEUS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_alert_rule_tests_fail_when_a_rule_is_wrong(tmp_path: Path) -> None:
    """Dropping the `or ... * 0` branch hides a job whose steps never succeeded: the tests must notice."""
    rules = (PROMETHEUS / "rules.yml").read_text()
    fallback = " or job:runtime_ops_step_failures:increase15m * 0"
    assert fallback in rules
    (tmp_path / "rules.yml").write_text(rules.replace(fallback, ""))
    shutil.copyfile(PROMETHEUS / "rules_test.yml", tmp_path / "rules_test.yml")
    result = _run([_promtool(), "test", "rules", "rules_test.yml"], cwd=tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "RuntimeOpsStepFailureRateHigh" in output and 'job="train_job"' in output, output


@pytest.mark.parametrize(
    ("correct", "wrong", "caught"),
    [
        # Without the fallback, a window with no helpful series has no share: the worst case stays silent.
        ("\n              or pipeline:runtime_ops_feedback_judged:increase30m * 0", "", 'pipeline="restarted"'),
        # Without `>= 0`, a day of 0/0 (NaN) is no baseline of 0: a spike on an idle pipeline stays silent.
        (
            "pipeline_route:runtime_ops_search_zero_results_ratio:1d_offset30m >= 0",
            "pipeline_route:runtime_ops_search_zero_results_ratio:1d_offset30m",
            'pipeline="idle"',
        ),
        # Without the offset, the baseline holds the drop it is compared with (the recorded baseline is off).
        ("[1d] offset 30m", "[1d]", "1d_offset30m"),
    ],
)
def test_live_quality_rule_tests_fail_when_a_rule_is_wrong(
    tmp_path: Path, correct: str, wrong: str, caught: str
) -> None:
    rules = (PROMETHEUS / "rules.yml").read_text()
    assert correct in rules
    (tmp_path / "rules.yml").write_text(rules.replace(correct, wrong))
    shutil.copyfile(PROMETHEUS / "rules_live_quality_test.yml", tmp_path / "rules_live_quality_test.yml")
    result = _run([_promtool(), "test", "rules", "rules_live_quality_test.yml"], cwd=tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode != 0 and caught in output, output


def _rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load((PROMETHEUS / "rules.yml").read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def test_every_alert_is_tested_firing_and_quiet() -> None:
    tests = [test for name in RULE_TESTS for test in yaml.safe_load((PROMETHEUS / name).read_text())["tests"]]
    cases = [case for t in tests for case in t.get("alert_rule_test", [])]
    for alert in (r["alert"] for r in _rules() if "alert" in r):
        mine = [c for c in cases if c["alertname"] == alert]
        assert any(c.get("exp_alerts") for c in mine), f"{alert} is never tested firing"
        assert any(not c.get("exp_alerts") for c in mine), f"{alert} is never tested staying quiet"


def test_alert_rules_cover_the_issue_families() -> None:
    exprs = {r["alert"]: r["expr"] for r in _rules() if "alert" in r}
    records = {r["record"]: r["expr"] for r in _rules() if "record" in r}
    expanded = {name: expr + " ".join(records[n] for n in records if n in expr) for name, expr in exprs.items()}

    def covered(metric: str) -> bool:
        return any(metric in expr for expr in expanded.values())

    for metric in (
        "runtime_ops_step_failure_total",  # failure rate
        "runtime_ops_runs_total",
        "runtime_ops_approvals_pending",  # approval backlog
        "runtime_ops_approval_oldest_pending_age_seconds",  # approval age
        "runtime_ops_landing_oldest_pending_age_seconds",  # landing lag
        "runtime_ops_landing_lag_seconds",
        "runtime_ops_documents_quarantined_total",  # quarantine spikes
        "runtime_ops_feedback_total",  # live quality: production's helpful share
        "runtime_ops_search_zero_results_total",  # live quality: requests that find nothing
        "runtime_ops_feedback_click_rank",  # live quality: where users click
    ):
        assert covered(metric), f"no alert watches {metric}"


# --- metric names --------------------------------------------------------------------------------------------

_PROMQL_KEYWORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "inf",
    "nan",
}


def promql_metric_names(expr: str) -> set[str]:
    """The metric names (and recording-rule names) an expression selects. Strings, label matchers, range and
    subquery brackets, grouping clauses and Grafana variables are removed first; what is left that is not a
    function call, a keyword or a number is a metric name."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', '""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"\$\{?\w+\}?", " ", text)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        word = match.group(0)
        following = text[match.end() :].lstrip()
        if following.startswith("(") or word.lower() in _PROMQL_KEYWORDS:
            continue
        if re.fullmatch(r"\d+(e\d+)?", word) or (match.start() > 0 and text[match.start() - 1].isdigit()):
            continue  # a number or a duration/exponent suffix
        names.add(word)
    return names


def test_promql_metric_names_parser() -> None:
    # The test helper below must itself be right for the contract test to mean anything.
    assert promql_metric_names(
        'histogram_quantile(0.95, sum by (job, le) (rate(runtime_ops_queue_latency_seconds_bucket{job=~"$job"}'
        "[$__rate_interval]))) > 600"
    ) == {"runtime_ops_queue_latency_seconds_bucket"}
    assert promql_metric_names('up{job="runtime_ops"} == 0 and on (x) foo:bar:5m * 1e3') == {"up", "foo:bar:5m"}
    assert promql_metric_names("runtime_ops_approval_oldest_pending_age_seconds > 4 * 3600") == {
        "runtime_ops_approval_oldest_pending_age_seconds"
    }


def _contract() -> tuple[set[str], dict[str, str]]:
    """The metric contract and each metric's kind. Imported from runtime_ops.observability.metrics, the module
    that serves /metrics, so a renamed metric breaks this test instead of silently emptying a panel."""
    from runtime_ops.observability.metrics import METRIC_NAMES, METRICS

    return set(METRIC_NAMES), {name: METRICS[name].kind for name in METRIC_NAMES}


def _series_names(family: str, kind: str) -> set[str]:
    if kind == "histogram":
        return {f"{family}_bucket", f"{family}_count", f"{family}_sum"}
    return {family}


# Series Prometheus itself generates (not runtime_ops metrics): scrape health and the alert states.
PROMETHEUS_SERIES = {"up", "ALERTS"}


def _panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            yield from panel.get("panels", [])
        else:
            yield panel


def _dashboard_exprs() -> dict[str, list[str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    return {p["title"]: [t["expr"] for t in p["targets"]] for p in _panels(dashboard)}


def test_rules_and_dashboard_use_only_contract_metrics() -> None:
    names, kinds = _contract()
    allowed = set().union(*(_series_names(n, kinds[n]) for n in names))
    recorded = {r["record"] for r in _rules() if "record" in r}
    sources = {f"rules.yml {r.get('alert') or r.get('record')}": [r["expr"]] for r in _rules()}
    sources.update({f"dashboard panel {t!r}": exprs for t, exprs in _dashboard_exprs().items()})
    templating = json.loads(DASHBOARD.read_text())["templating"]["list"]
    sources.update(
        {
            f"dashboard variable {v['name']}": [v["definition"].removeprefix("label_values(").split(",")[0]]
            for v in templating
        }
    )
    for where, exprs in sources.items():
        for expr in exprs:
            used = promql_metric_names(expr)
            assert used, f"{where}: no metric in {expr!r}"
            unknown = used - allowed - recorded - PROMETHEUS_SERIES
            assert not unknown, f"{where}: {sorted(unknown)} not in the metric contract"


def test_dashboard_has_a_panel_for_every_metric_family() -> None:
    names, kinds = _contract()
    used = set().union(*(promql_metric_names(e) for exprs in _dashboard_exprs().values() for e in exprs))
    for name in names:
        assert _series_names(name, kinds[name]) & used, f"no dashboard panel shows {name}"


def test_dashboard_is_well_formed() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in _panels(dashboard):
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24, panel["title"]
        assert panel["targets"] and all(t["refId"] and t["expr"] for t in panel["targets"]), panel["title"]
