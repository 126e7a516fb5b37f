"""The deploy/k8s/ deployment, checked without a cluster, `helm` or a network.

- Every manifest is one object; built-in kinds validate (strict: unknown fields fail) against the Kubernetes
  `KUBERNETES_VERSION` schemas that `kubernetes-validate` ships; the Prometheus Operator's ServiceMonitor and
  PrometheusRule validate against the CRDs' OpenAPI schemas vendored under deploy/k8s/schemas/ (unknown fields
  fail, as with kubectl's strict field validation).
- values.yaml for the Helm chart `dagster/dagster` validates against the chart's values.schema.json (vendored; see
  deploy/k8s/schemas/README.md), every key it sets being one the chart declares.
- The Kubernetes files run what docker/docker-compose.yaml runs: the code server's and the ops API's entry points
  and ports, the environment variable names of each process (less what Kubernetes replaces, named in
  `COMPOSE_ONLY_ENV`), the instance settings of docker/dagster.yaml (run queue limits, pool granularity, run
  retries, run monitoring), and the PrometheusRule's groups are docker/prometheus/rules.yml's.
- The schema checks are shown to reject broken copies (a misspelt field, a wrong type, an unknown chart key).

The PrometheusRule is generated from rules.yml:
`python -m runtime_ops_tests.integration.test_k8s_deploy --write-prometheusrule`.
"""

from __future__ import annotations

import copy
import importlib.resources
import json
import re
import shlex
import sys
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
SCHEMAS = K8S / "schemas"
DOCKER = ROOT / "docker"
RULES = DOCKER / "prometheus" / "rules.yml"

# The Kubernetes release the manifests are validated against (one `kubernetes-validate` ships; README names it).
KUBERNETES_VERSION = "1.30.0"
# The Helm chart release installed (README's `helm install --version`): the chart's version is Dagster's.
CHART_VERSION = "1.13.27"
# `helm install <release>`: the chart names the instance ConfigMap `<release>-instance` (the ops API mounts it).
HELM_RELEASE = "dagster"
CHART_VALUES_SCHEMA = SCHEMAS / "dagster-values.schema.json"
# The chart schema's `$ref`s point at this file of yannh/kubernetes-json-schema; resolved offline (see below).
CHART_K8S_DEFINITIONS_URI = (
    "https://raw.githubusercontent.com/yannh/kubernetes-json-schema/master/v1.19.0/_definitions.json"
)
PROMETHEUS_OPERATOR_RELEASE = "0.93.0"
CRDS = {
    "ServiceMonitor": SCHEMAS / "monitoring.coreos.com_servicemonitors.yaml",
    "PrometheusRule": SCHEMAS / "monitoring.coreos.com_prometheusrules.yaml",
}

# Environment variables compose sets that the Kubernetes deployment replaces, and why.
COMPOSE_ONLY_ENV = {
    # MinIO: on Kubernetes S3 itself, reached with the service account's IAM role (no keys, no endpoint).
    "AWS_ENDPOINT_URL": "S3 is real S3",
    "AWS_ACCESS_KEY_ID": "IAM role for the service account",
    "AWS_SECRET_ACCESS_KEY": "IAM role for the service account",
    # docker/dagster.yaml reads these; the chart writes the instance's storage from values.yaml and gives every
    # Dagster pod DAGSTER_PG_PASSWORD from global.postgresqlSecretName.
    "DAGSTER_PG_HOST": "values.yaml postgresql.postgresqlHost",
    "DAGSTER_PG_PORT": "values.yaml postgresql.service.port",
    "DAGSTER_PG_USER": "values.yaml postgresql.postgresqlUsername",
    "DAGSTER_PG_PASSWORD": "set by the chart from global.postgresqlSecretName",
    "DAGSTER_PG_DB": "values.yaml postgresql.postgresqlDatabase",
    "DAGSTER_COMPUTE_LOG_BUCKET": "values.yaml computeLogManager",
    "DAGSTER_CURRENT_IMAGE": "set by the chart on the user code deployment",
}
# Set on the ops API beside the shared environment: the chart's instance (DAGSTER_HOME) and its password.
OPS_API_INSTANCE_ENV = {"DAGSTER_HOME", "DAGSTER_PG_PASSWORD"}


# --- loading -------------------------------------------------------------------------------------------------


def _manifest_files() -> list[Path]:
    return sorted(p for p in K8S.glob("*.yaml") if p.name != "values.yaml")


def _load_one(path: Path) -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    assert len(docs) == 1, f"{path.name}: one object per file, found {len(docs)}"
    return docs[0]


def _manifests() -> dict[str, dict[str, Any]]:
    return {p.name: _load_one(p) for p in _manifest_files()}


def _by_kind(kind: str, name: str | None = None) -> dict[str, Any]:
    found = [m for m in _manifests().values() if m["kind"] == kind and name in (None, m["metadata"]["name"])]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


@pytest.fixture(scope="module")
def values() -> dict[str, Any]:
    return yaml.safe_load((K8S / "values.yaml").read_text())


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    # The compose file as written (the rendered one, with secrets, is test_docker_deploy's concern).
    return yaml.safe_load((DOCKER / "docker-compose.yaml").read_text())


# --- Kubernetes schemas --------------------------------------------------------------------------------------


def _k8s_definitions() -> dict[str, Any]:
    """The Kubernetes object definitions (`$defs`) of KUBERNETES_VERSION, as kubernetes-validate ships them."""
    root = importlib.resources.files("kubernetes_validate") / "kubernetes-json-schema"
    path = root / f"v{KUBERNETES_VERSION}-local-strict" / "_definitions.json"
    return json.loads(path.read_text())


def _validate_builtin(doc: dict[str, Any]) -> None:
    import kubernetes_validate

    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def _k8s_validator(definition: str) -> Any:
    """A validator for one Kubernetes definition (e.g. ObjectMeta) of KUBERNETES_VERSION."""
    import jsonschema
    from referencing import Registry, Resource

    defs = _k8s_definitions()
    registry = Registry().with_resource(defs["$id"], Resource.from_contents(defs))
    return jsonschema.Draft202012Validator({"$ref": f"{defs['$id']}#/$defs/{definition}"}, registry=registry)


def _strict_openapi(schema: Any) -> Any:
    """A CRD's structural schema with unknown fields refused, as the API server does under kubectl's default strict
    field validation (CRD schemas leave `additionalProperties` unset; the server prunes or rejects instead)."""
    if isinstance(schema, list):
        return [_strict_openapi(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict_openapi(v) for k, v in schema.items()}
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def _crd_errors(doc: dict[str, Any]) -> list[str]:
    import jsonschema

    crd = yaml.safe_load(CRDS[doc["kind"]].read_text())
    group, _, version = doc["apiVersion"].partition("/")
    errors = []
    if group != crd["spec"]["group"] or doc["kind"] != crd["spec"]["names"]["kind"]:
        errors.append(f"{doc['apiVersion']} {doc['kind']} is not {crd['spec']['group']} {crd['spec']['names']['kind']}")
        return errors
    served = {v["name"]: v for v in crd["spec"]["versions"] if v.get("served")}
    if version not in served:
        return [f"version {version} not served by the CRD (served: {sorted(served)})"]
    schema = _strict_openapi(served[version]["schema"]["openAPIV3Schema"])
    # `metadata` is a plain object in a CRD's schema: it is checked as Kubernetes' ObjectMeta instead.
    schema["properties"]["metadata"] = {"type": "object"}
    validator = jsonschema.Draft7Validator(schema)
    errors += [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]
    meta = _k8s_validator("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
    errors += [
        f"metadata.{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in meta.iter_errors(doc["metadata"])
    ]
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", doc["metadata"].get("name", "")):
        errors.append(f"metadata.name {doc['metadata'].get('name')!r} is not a DNS-1123 label")
    return errors


def test_each_file_holds_one_object_of_an_expected_kind() -> None:
    kinds = sorted(m["kind"] for m in _manifests().values())
    assert kinds == sorted(
        [
            "ConfigMap",
            "Deployment",
            "Job",
            "PodDisruptionBudget",
            "PrometheusRule",
            "Service",
            "ServiceAccount",
            "ServiceMonitor",
        ]
    ), kinds
    # Secrets are created by the operator from their own files (README), never committed as manifests.
    assert "Secret" not in kinds


@pytest.mark.parametrize("name", [p.name for p in _manifest_files()])
def test_manifest_validates_against_its_schema(name: str) -> None:
    doc = _load_one(K8S / name)
    if doc["kind"] in CRDS:
        assert not _crd_errors(doc), _crd_errors(doc)
    else:
        _validate_builtin(doc)


def test_schema_validation_fails_on_broken_manifests() -> None:
    """The validations above reject what the API server would: a misspelt field, a wrong type, a bad duration."""
    import kubernetes_validate

    deployment = copy.deepcopy(_by_kind("Deployment"))
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["readinessProbe"]["httpGet"]["paht"] = container["readinessProbe"]["httpGet"].pop("path")
    with pytest.raises(kubernetes_validate.ValidationError):
        _validate_builtin(deployment)
    service = copy.deepcopy(_by_kind("Service"))
    service["spec"]["ports"][0]["port"] = "eight thousand"
    with pytest.raises(kubernetes_validate.ValidationError):
        _validate_builtin(service)

    monitor = copy.deepcopy(_by_kind("ServiceMonitor"))
    monitor["spec"]["endpoints"][0]["interval"] = "15 seconds"
    monitor["spec"]["endpoints"][0]["honourLabels"] = True
    errors = " ".join(_crd_errors(monitor))
    assert "15 seconds" in errors and "honourLabels" in errors, errors
    rule = copy.deepcopy(_by_kind("PrometheusRule"))
    del rule["spec"]["groups"][0]["name"]
    assert any("'name' is a required property" in e for e in _crd_errors(rule))


def test_vendored_crds_are_the_stated_release() -> None:
    for kind, path in CRDS.items():
        crd = yaml.safe_load(path.read_text())
        assert crd["kind"] == "CustomResourceDefinition" and crd["spec"]["names"]["kind"] == kind
        assert crd["metadata"]["annotations"]["operator.prometheus.io/version"] == PROMETHEUS_OPERATOR_RELEASE
    readme = (SCHEMAS / "README.md").read_text()
    assert f"v{PROMETHEUS_OPERATOR_RELEASE}" in readme
    assert all(p.name in readme for p in [*CRDS.values(), CHART_VALUES_SCHEMA])


# --- the Helm chart's values ---------------------------------------------------------------------------------


def _overlay_schema(schema: Any, *, in_condition: bool = False) -> Any:
    """The chart's schema made for checking an overlay values file. Helm validates the chart's defaults merged with
    the file, so the schema `require`s keys the file leaves to the defaults: those requirements are dropped (except
    the if/then ones, which tie a `type` to its config block). And Helm ignores keys the chart does not know, so a
    misspelt key would be silently dropped: every object that declares its properties refuses others here."""
    if isinstance(schema, list):
        return [_overlay_schema(s, in_condition=in_condition) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key == "required" and not in_condition:
            continue
        out[key] = _overlay_schema(value, in_condition=in_condition or key in ("if", "then"))
    if "properties" in out and "additionalProperties" not in out and not in_condition:
        out["additionalProperties"] = False
    return out


def _chart_validator() -> Any:
    """Draft 2020-12 (pydantic's output) with the chart's Kubernetes `$ref`s resolved to KUBERNETES_VERSION's
    definitions from kubernetes-validate (their pointers are rewritten from `$defs` to the `definitions` layout the
    chart's URL has), so probes, env, volumes and resources are checked against the Kubernetes API too."""
    import jsonschema
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    schema = json.loads(CHART_VALUES_SCHEMA.read_text())
    defs = json.loads(json.dumps(_k8s_definitions()["$defs"]).replace('"#/$defs/', '"#/definitions/'))
    k8s = Resource.from_contents({"definitions": defs}, default_specification=DRAFT202012)
    registry = Registry().with_resource(CHART_K8S_DEFINITIONS_URI, k8s)
    return jsonschema.Draft202012Validator(_overlay_schema(schema), registry=registry)


def _values_errors(values: Mapping[str, Any]) -> list[str]:
    schema = json.loads(CHART_VALUES_SCHEMA.read_text())
    # The top level allows any key (the chart's own `additionalProperties: true`); the file may set only known ones.
    errors = [f"{key}: not a key of the chart" for key in values if key not in schema["properties"]]
    errors += [
        f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in _chart_validator().iter_errors(dict(values))
    ]
    return errors


def test_vendored_chart_schema_is_dagsters() -> None:
    schema = json.loads(CHART_VALUES_SCHEMA.read_text())
    assert schema["title"] == "DagsterHelmValues"
    assert {"dagster-user-deployments", "runLauncher", "dagsterDaemon", "concurrency", "postgresql"} <= set(
        schema["properties"]
    )
    assert CHART_K8S_DEFINITIONS_URI in CHART_VALUES_SCHEMA.read_text()


def test_values_validate_against_the_chart_schema(values: dict[str, Any]) -> None:
    errors = _values_errors(values)
    assert not errors, "\n".join(errors)


@pytest.mark.parametrize(
    ("path", "bad", "expected"),
    [
        (("runLauncher", "type"), "K8sJobLauncher", "is not one of"),
        (("dagsterDaemon", "runRetries", "retryOnAssetOrOpFailures"), False, "Additional properties"),
        (("concurrency", "runs", "tagConcurrencyLimits", 0, "limit"), "one", "is not of type 'integer'"),
        # Checked against Kubernetes' Probe through the chart's `$ref`s.
        (
            ("dagster-user-deployments", "deployments", 0, "readinessProbe"),
            {"enabled": True, "periodSecond": 20},
            "periodSecond",
        ),
        (("dagsterDaemon", "runMonitoring"), ["enabled"], "is not of type 'object'"),
        (("postgresql", "postgresqlHostname"), "db", "Additional properties"),
        (("serviceAccounts",), {}, "not a key of the chart"),
    ],
)
def test_chart_schema_check_fails_on_a_broken_values_file(
    values: dict[str, Any], path: tuple[Any, ...], bad: Any, expected: str
) -> None:
    broken = copy.deepcopy(values)
    node: Any = broken
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = bad
    errors = " ".join(_values_errors(broken))
    assert expected in errors, errors


def _secret_values(node: Any, path: str = "") -> Iterator[str]:
    """Paths of string values under a key that names a password, token or secret (not a Secret's name)."""
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{path}.{key}" if path else str(key)
            if isinstance(value, str) and value and re.search(r"(?i)password|token|secret$", str(key)):
                yield here
            yield from _secret_values(value, here)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from _secret_values(item, f"{path}[{i}]")


def test_values_keep_secrets_in_secrets(values: dict[str, Any]) -> None:
    assert values["postgresql"]["enabled"] is False and "postgresqlPassword" not in values["postgresql"]
    assert values["generatePostgresqlPasswordSecret"] is False
    assert values["global"]["postgresqlSecretName"] == "dagster-postgresql-secret"
    assert not list(_secret_values(values)), f"secret values in values.yaml: {list(_secret_values(values))}"
    user = values["dagster-user-deployments"]["deployments"][0]
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    for where in (user, launcher):
        assert [s["name"] for s in where["envSecrets"]] == ["runtime-ops-secrets"]
        assert [c["name"] for c in where["envConfigMaps"]] == [_by_kind("ConfigMap")["metadata"]["name"]]
    assert values["runLauncher"]["type"] == "K8sRunLauncher"


def test_service_accounts_carry_one_iam_role(values: dict[str, Any]) -> None:
    arn = values["serviceAccount"]["annotations"]["eks.amazonaws.com/role-arn"]
    assert re.fullmatch(r"arn:aws:iam::\d{12}:role/[\w+=,.@-]+", arn), arn
    api_sa = _by_kind("ServiceAccount")
    assert api_sa["metadata"]["annotations"]["eks.amazonaws.com/role-arn"] == arn
    # The API's pods and the migration use it; they never call the Kubernetes API.
    assert api_sa["automountServiceAccountToken"] is False
    for kind in ("Deployment", "Job"):
        assert _pod_spec(_by_kind(kind))["serviceAccountName"] == api_sa["metadata"]["name"], kind


# --- the same processes as docker-compose --------------------------------------------------------------------


def _pod_spec(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"]["template"]["spec"]


def _command(argv: Any) -> list[str]:
    return shlex.split(argv) if isinstance(argv, str) else [str(a) for a in argv]


def _dagster_params(argv: list[str]) -> dict[str, Any]:
    """`dagster ...` parsed by Dagster's own CLI (an unknown option or a bad value raises)."""
    import click
    from dagster._cli import cli as dagster_cli

    assert argv[0] == "dagster", argv
    cmd: Any = dagster_cli
    args = argv[1:]
    while isinstance(cmd, click.Group):
        sub = cmd.get_command(click.Context(cmd), args[0])
        assert sub is not None, args[0]
        cmd, args = sub, args[1:]
    return dict(cmd.make_context(cmd.name or "cmd", args).params)


def _user_deployment(values: dict[str, Any]) -> dict[str, Any]:
    deployments = values["dagster-user-deployments"]["deployments"]
    assert len(deployments) == 1
    return deployments[0]


def _chart_grpc_argv(deployment: dict[str, Any]) -> list[str]:
    # What the chart's user deployment template runs (dagster-user-deployments/templates/deployment-user.yaml).
    return ["dagster", "api", "grpc", "-h", "0.0.0.0", "-p", str(deployment["port"]), *deployment["dagsterApiGrpcArgs"]]


def _image(image: dict[str, Any]) -> str:
    return f"{image['repository']}:{image['tag']}"


def test_code_server_runs_the_compose_entry_point_and_port(values: dict[str, Any], compose: dict[str, Any]) -> None:
    deployment = _user_deployment(values)
    compose_argv = _command(compose["services"]["code-server"]["command"])
    k8s = _dagster_params(_chart_grpc_argv(deployment))
    assert k8s == _dagster_params(compose_argv)
    assert k8s["port"] == deployment["port"] == 4000
    # The webserver and the daemon reach it by its Service (the deployment's name) under compose's location name.
    docker_ws = yaml.safe_load((DOCKER / "workspace.yaml").read_text())["load_from"][0]["grpc_server"]
    workspace = values["dagsterWebserver"]["workspace"]
    assert workspace["enabled"] and workspace["servers"] == [
        {"host": deployment["name"], "port": deployment["port"], "name": docker_ws["location_name"]}
    ]
    assert k8s["location_name"] == docker_ws["location_name"]


def test_one_image_for_every_process(values: dict[str, Any]) -> None:
    images = {
        "code server": _image(_user_deployment(values)["image"]),
        "webserver": _image(values["dagsterWebserver"]["image"]),
        "daemon": _image(values["dagsterDaemon"]["image"]),
    }
    for kind in ("Deployment", "Job"):
        images[kind] = _pod_spec(_by_kind(kind))["containers"][0]["image"]
    assert len(set(images.values())) == 1, images
    # The image's user cannot bind ports below 1024: the webserver listens where compose's does.
    compose_port = 3000
    assert values["dagsterWebserver"]["service"]["port"] == compose_port
    assert values["dagsterWebserver"]["readinessProbe"]["httpGet"]["port"] == compose_port


def test_ops_api_runs_the_compose_entry_point_port_and_probes(compose: dict[str, Any]) -> None:
    from fastapi.routing import APIRoute

    from runtime_ops.api.routes import health, metrics
    from runtime_ops.cli import build_parser

    deployment = _by_kind("Deployment", "runtime-ops-api")
    container = _pod_spec(deployment)["containers"][0]
    command = _command(container["command"])
    assert command == _command(compose["services"]["ops-api"]["command"])
    args = build_parser().parse_args(command[1:])
    assert args.host == "0.0.0.0"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": args.port}

    routes = {r.path for r in [*health.router.routes, *metrics.router.routes] if isinstance(r, APIRoute)}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert {"/readyz", "/healthz", "/metrics"} <= routes

    service = _by_kind("Service", "runtime-ops-api")
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert service["spec"]["selector"] == selector
    assert deployment["spec"]["template"]["metadata"]["labels"].items() >= selector.items()
    assert [(p["name"], p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [("http", args.port, "http")]
    pdb = _by_kind("PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"] == selector
    assert pdb["spec"]["minAvailable"] < deployment["spec"]["replicas"]


def test_service_monitor_scrapes_like_the_compose_prometheus() -> None:
    prom = yaml.safe_load((DOCKER / "prometheus" / "prometheus.yml").read_text())
    job = next(j for j in prom["scrape_configs"] if j["job_name"] == "runtime_ops")
    monitor = _by_kind("ServiceMonitor")
    service = _by_kind("Service", "runtime-ops-api")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert endpoint["path"] == job["metrics_path"]
    assert endpoint["honorLabels"] is job["honor_labels"] is True
    assert (endpoint["interval"], endpoint["scrapeTimeout"]) == (job["scrape_interval"], job["scrape_timeout"])
    # /metrics needs a `read` key: a bearer token from a Secret, as compose's credentials_file.
    assert endpoint["authorization"]["type"] == job["authorization"]["type"] == "Bearer"
    assert set(endpoint["authorization"]["credentials"]) == {"name", "key"}
    # The `job` label is compose's job_name, the one RuntimeOpsMetricsDown selects.
    assert service["metadata"]["labels"][monitor["spec"]["jobLabel"]] == job["job_name"]
    assert f'up{{job="{job["job_name"]}"}}' in RULES.read_text()


def _env_file_keys(path: Path) -> list[str]:
    return re.findall(r"^([A-Z][A-Z0-9_]*)=", path.read_text(), flags=re.M)


def _k8s_env_sources() -> dict[str, set[str]]:
    """Variable names per ConfigMap / Secret name (the Secret's keys are its example env file's)."""
    configmap = _by_kind("ConfigMap")
    return {
        configmap["metadata"]["name"]: set(configmap["data"]),
        "runtime-ops-secrets": set(_env_file_keys(K8S / "runtime-ops-secrets.env.example")),
    }


def _names_from(config_maps: list[str], secrets: list[str]) -> set[str]:
    sources = _k8s_env_sources()
    missing = set(config_maps + secrets) - set(sources)
    assert not missing, f"no ConfigMap/Secret named {missing} in deploy/k8s"
    return set().union(*(sources[name] for name in config_maps + secrets))


def _container_env_names(doc: dict[str, Any]) -> set[str]:
    container = _pod_spec(doc)["containers"][0]
    config_maps = [e["configMapRef"]["name"] for e in container.get("envFrom", []) if "configMapRef" in e]
    secrets = [e["secretRef"]["name"] for e in container.get("envFrom", []) if "secretRef" in e]
    return _names_from(config_maps, secrets) | {e["name"] for e in container.get("env", [])}


def _compose_env(compose: dict[str, Any], service: str) -> set[str]:
    return set(compose["services"][service]["environment"]) - set(COMPOSE_ONLY_ENV)


def test_every_process_gets_the_compose_environment(values: dict[str, Any], compose: dict[str, Any]) -> None:
    deployment = _user_deployment(values)
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    docker_instance = yaml.safe_load((DOCKER / "dagster.yaml").read_text())
    k8s = {
        "code-server": _names_from(
            [c["name"] for c in deployment["envConfigMaps"]], [s["name"] for s in deployment["envSecrets"]]
        ),
        "runs": _names_from(
            [c["name"] for c in launcher["envConfigMaps"]], [s["name"] for s in launcher["envSecrets"]]
        ),
        "ops-api": _container_env_names(_by_kind("Deployment", "runtime-ops-api")) - OPS_API_INSTANCE_ENV,
        "migrate": _container_env_names(_by_kind("Job")),
    }
    expected = {
        "code-server": _compose_env(compose, "code-server"),
        "runs": set(docker_instance["run_launcher"]["config"]["env_vars"]) - set(COMPOSE_ONLY_ENV),
        "ops-api": _compose_env(compose, "ops-api"),
        "migrate": _compose_env(compose, "migrate"),
    }
    for process, names in k8s.items():
        assert names == expected[process], (
            f"{process}: missing on Kubernetes {sorted(expected[process] - names)}, "
            f"not in compose {sorted(names - expected[process])}"
        )
    # What replaces the compose-only variables is really there.
    assert values["postgresql"]["postgresqlHost"] and values["postgresql"]["postgresqlDatabase"] == "dagster"
    assert values["computeLogManager"]["config"]["s3ComputeLogManager"]["bucket"] == "runtime-ops-logs"
    ops_env = {e["name"]: e for e in _pod_spec(_by_kind("Deployment"))["containers"][0]["env"]}
    secret_ref = ops_env["DAGSTER_PG_PASSWORD"]["valueFrom"]["secretKeyRef"]
    assert secret_ref == {"name": values["global"]["postgresqlSecretName"], "key": "postgresql-password"}
    assert ops_env["DAGSTER_HOME"]["value"] == values["global"]["dagsterHome"]


def _secret_bearing(compose: dict[str, Any]) -> set[str]:
    """Compose variables that hold a secret: settings typed SecretStr, and values built from a *PASSWORD."""
    from pydantic import SecretStr

    from runtime_ops.settings import Settings

    secret_settings = set()
    for field in Settings.model_fields.values():
        if field.annotation is SecretStr or SecretStr in typing.get_args(field.annotation):
            secret_settings.update(getattr(field.validation_alias, "choices", []) or [])
    env = compose["x-runtime-env"]
    embedded = {name for name, value in env.items() if re.search(r"\$\{\w*PASSWORD", str(value))}
    return ((secret_settings & set(env)) | embedded) - set(COMPOSE_ONLY_ENV)


def test_secrets_come_from_the_secret_and_nothing_else(compose: dict[str, Any]) -> None:
    secrets = set(_env_file_keys(K8S / "runtime-ops-secrets.env.example"))
    expected = _secret_bearing(compose)
    assert {"RUNTIME_OPS_DATABASE_URL", "REDIS_URL", "RUNTIME_OPS_LINK_SECRET", "SLACK_SIGNING_SECRET"} <= expected
    assert secrets == expected, f"missing {sorted(expected - secrets)}, not secret {sorted(secrets - expected)}"
    assert not set(_by_kind("ConfigMap")["data"]) & expected
    # The example holds no value, and no manifest sets one inline.
    example = (K8S / "runtime-ops-secrets.env.example").read_text()
    assert not re.search(r"^[A-Z][A-Z0-9_]*=\S", example, flags=re.M), "a value in runtime-ops-secrets.env.example"
    for name, doc in _manifests().items():
        for container in (doc.get("spec", {}).get("template", {}).get("spec", {}) or {}).get("containers", []):
            inline = {e["name"] for e in container.get("env", []) if "value" in e}
            assert not inline & (expected | {"DAGSTER_PG_PASSWORD"}), (name, inline)


def _settings_aliases() -> set[str]:
    from runtime_ops.settings import Settings

    names: set[str] = set()
    for field in Settings.model_fields.values():
        names.update(n for n in getattr(field.validation_alias, "choices", None) or [] if isinstance(n, str))
    return names


def test_kubernetes_environment_is_valid_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from runtime_ops.settings import Settings

    for name in _settings_aliases():
        monkeypatch.delenv(name, raising=False)
    dummies = {
        "RUNTIME_OPS_DATABASE_URL": "postgresql://runtime_ops:pw@db.example.internal:5432/runtime_ops",
        "RUNTIME_OPS_VECTOR_STORE": "postgresql://runtime_ops:pw@db.example.internal:5432/runtime_ops",
        "REDIS_URL": "rediss://:pw@redis.example.internal:6379/0",
        "RUNTIME_OPS_APPROVERS": "U024BE7LH",
    }
    env = {**_by_kind("ConfigMap")["data"], **{k: "" for k in _env_file_keys(K8S / "runtime-ops-secrets.env.example")}}
    env.update({k: "x" for k in ("RUNTIME_OPS_LINK_SECRET", "RUNTIME_OPS_AUDIT_KEY", "RUNTIME_OPS_ALERT_TOKEN")})
    env.update(dummies)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    s = Settings()
    assert s.resolved_landing.startswith("s3://") and s.aws_endpoint_url is None
    assert s.audit_anchors and s.audit_anchors.startswith("s3://")
    assert s.public_url.startswith("https://") and s.log_format == "json"
    assert not s.slack_bot_token and not s.model_endpoint


def test_compute_logs_use_the_runtime_region(values: dict[str, Any]) -> None:
    region = _by_kind("ConfigMap")["data"]["AWS_DEFAULT_REGION"]
    assert values["computeLogManager"]["config"]["s3ComputeLogManager"]["region"] == region


# --- the instance: docker/dagster.yaml's settings through the chart ------------------------------------------


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _instance_from_values(values: dict[str, Any]) -> dict[str, Any]:
    """The dagster.yaml sections the chart renders from these values (helm/dagster/templates/configmap-instance.yaml
    and helpers/instance/*.tpl): camelCase keys become the instance's snake_case ones."""
    daemon = values["dagsterDaemon"]
    coordinator = daemon["runCoordinator"]["config"]["customRunCoordinator"]
    concurrency = values["concurrency"]
    assert concurrency["enabled"] and daemon["runCoordinator"]["type"] == "CustomRunCoordinator"
    s3 = values["computeLogManager"]["config"]["s3ComputeLogManager"]
    retention = values["retention"]
    return {
        "telemetry": {"enabled": values["telemetry"]["enabled"]},
        "run_coordinator": {k: coordinator[k] for k in ("module", "class", "config")},
        "concurrency": {
            "pools": {_snake(k): v for k, v in concurrency["pools"].items()},
            "runs": {_snake(k): v for k, v in concurrency["runs"].items()},
        },
        "run_launcher": {"module": "dagster_k8s", "class": values["runLauncher"]["type"], "config": {}},
        "run_retries": {_snake(k): v for k, v in daemon["runRetries"].items()},
        "run_monitoring": {_snake(k): v for k, v in daemon["runMonitoring"].items()},
        "compute_logs": {
            "module": "dagster_aws.s3.compute_log_manager",
            "class": values["computeLogManager"]["type"],
            "config": {_snake(k): v for k, v in s3.items()},
        },
        "sensors": {_snake(k): v for k, v in daemon["sensors"].items()},
        "schedules": {_snake(k): v for k, v in daemon["schedules"].items()},
        "retention": {kind: {"purge_after_days": retention[kind]["purgeAfterDays"]} for kind in ("schedule", "sensor")},
    }


def test_instance_settings_are_docker_dagster_yamls(values: dict[str, Any]) -> None:
    docker = yaml.safe_load((DOCKER / "dagster.yaml").read_text())
    k8s = _instance_from_values(values)
    assert k8s["concurrency"]["runs"] == docker["concurrency"]["runs"]
    # Pools hold runs in the queue in both; the embedding pool's limit differs (one host vs one-core run pods).
    assert k8s["concurrency"]["pools"]["granularity"] == docker["concurrency"]["pools"]["granularity"] == "run"
    assert k8s["run_coordinator"] == docker["run_coordinator"]
    assert k8s["run_retries"] == docker["run_retries"]
    assert k8s["run_retries"]["retry_on_asset_or_op_failure"] is False
    assert k8s["run_monitoring"] == docker["run_monitoring"]
    assert (k8s["sensors"], k8s["schedules"], k8s["telemetry"]) == (
        docker["sensors"],
        docker["schedules"],
        docker["telemetry"],
    )
    for kind, policy in docker["retention"].items():
        mine = k8s["retention"][kind]["purge_after_days"]
        want = policy["purge_after_days"]
        assert mine == want or (isinstance(want, dict) and mine.items() >= want.items()), kind
    assert k8s["compute_logs"]["config"]["prefix"] == docker["compute_logs"]["config"]["prefix"]


def test_instance_from_values_passes_dagsters_instance_schema(values: dict[str, Any], tmp_path: Path) -> None:
    from dagster._config import validate_config
    from dagster._core.instance.config import dagster_instance_config
    from dagster._core.run_coordinator import QueuedRunCoordinator
    from dagster_aws.s3.compute_log_manager import S3ComputeLogManager

    instance = _instance_from_values(values)
    pg = values["postgresql"]
    instance["storage"] = {
        "postgres": {
            "postgres_db": {
                "hostname": pg["postgresqlHost"],
                "username": pg["postgresqlUsername"],
                "password": {"env": "DAGSTER_PG_PASSWORD"},
                "db_name": pg["postgresqlDatabase"],
                "port": pg["service"]["port"],
                "params": pg["postgresqlParams"],
            }
        }
    }
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(instance))
    config, _ = dagster_instance_config(str(tmp_path))
    assert config["run_retries"]["retry_on_asset_or_op_failure"] is False
    assert validate_config(QueuedRunCoordinator.config_type(), instance["run_coordinator"]["config"]).success
    assert validate_config(S3ComputeLogManager.config_type(), instance["compute_logs"]["config"]).success


def test_instance_from_values_holds_pooled_runs_in_the_queue(values: dict[str, Any], tmp_path: Path) -> None:
    """The chart's instance, as a real DagsterInstance (SQLite storage instead of PostgreSQL: storage does not change
    the concurrency settings): the embedding pool is enforced when runs are dequeued, below the run limit."""
    import dagster as dg
    from dagster._core.instance.config import PoolGranularity
    from dagster._core.run_coordinator import QueuedRunCoordinator

    instance_yaml = _instance_from_values(values)
    for section in ("run_launcher", "compute_logs"):  # dagster-k8s is image-only; S3 is not reached here
        del instance_yaml[section]
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(instance_yaml))
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        assert isinstance(instance.run_coordinator, QueuedRunCoordinator)
        config = instance.get_concurrency_config()
        assert config.pool_config.pool_granularity == PoolGranularity.RUN
        assert config.pool_config.default_pool_limit == values["concurrency"]["pools"]["defaultLimit"]
        assert config.run_queue_config is not None
        assert config.pool_config.default_pool_limit < config.run_queue_config.max_concurrent_runs


def test_run_pods_request_the_cores_a_partition_embeds_with(values: dict[str, Any]) -> None:
    from runtime_ops.pipeline.spec import BackfillSpec

    resources = values["runLauncher"]["config"]["k8sRunLauncher"]["resources"]
    assert resources["requests"]["cpu"] == str(BackfillSpec().cores)
    # No CPU limit: runs that size their embedding workers from the node's cores would be throttled.
    assert "cpu" not in resources.get("limits", {})


def test_tag_limits_name_real_jobs(values: dict[str, Any]) -> None:
    from runtime_ops.definitions import defs

    tags = [job.tags for job in defs.resolve_all_job_defs()]
    for limit in values["concurrency"]["runs"]["tagConcurrencyLimits"]:
        assert any(limit["key"] in t for t in tags), f"no job carries {limit['key']!r}"


# --- Prometheus rules -----------------------------------------------------------------------------------------


class _LiteralDumper(yaml.SafeDumper):
    pass


def _str_representer(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_LiteralDumper.add_representer(str, _str_representer)

PROMETHEUS_RULE_HEADER = """\
# Generated from docker/prometheus/rules.yml (do not edit; the test checks the groups are identical):
#   python -m runtime_ops_tests.integration.test_k8s_deploy --write-prometheusrule
# Your Prometheus' ruleSelector must match these labels (kube-prometheus-stack selects `release: <its release>`).
"""


def render_prometheus_rule() -> str:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    doc = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "runtime-ops", "labels": {"app.kubernetes.io/part-of": "runtime-ops"}},
        "spec": {"groups": groups},
    }
    return PROMETHEUS_RULE_HEADER + yaml.dump(doc, Dumper=_LiteralDumper, sort_keys=False, width=10_000)


def test_prometheus_rule_groups_are_rules_yml() -> None:
    rule = _by_kind("PrometheusRule")
    assert rule["spec"]["groups"] == yaml.safe_load(RULES.read_text())["groups"], (
        "deploy/k8s/prometheusrule.yaml is out of date: python -m runtime_ops_tests.integration.test_k8s_deploy "
        "--write-prometheusrule"
    )
    assert yaml.safe_load(render_prometheus_rule()) == rule


# --- the image and the README --------------------------------------------------------------------------------


def test_dagster_k8s_is_pinned_beside_dagster_docker() -> None:
    lock = (ROOT / "requirements.lock").read_text()
    dagster = re.search(r"^dagster==(\S+)$", lock, flags=re.M)
    integrations = re.search(r"^dagster-postgres==(\S+)$", lock, flags=re.M)
    assert dagster and integrations and dagster.group(1) == CHART_VERSION
    lines = [ln for ln in (DOCKER / "Dockerfile").read_text().splitlines() if "dagster-k8s==" in ln]
    assert len(lines) == 1 and f"dagster-docker=={integrations.group(1)}" in lines[0], lines
    assert re.findall(r"dagster-k8s==(\S+)", lines[0]) == [integrations.group(1)]


def _deploy_kubernetes() -> str:
    """The Kubernetes steps of the deploy page (docs/deploy.md, linked from the README)."""
    text = (ROOT / "docs" / "deploy.md").read_text()
    match = re.search(r"^## Kubernetes\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
    assert match, "docs/deploy.md has no '## Kubernetes' section"
    return match.group(1)


def test_deploy_page_applies_every_file_at_the_checked_versions() -> None:
    section = _deploy_kubernetes()
    assert f"--version {CHART_VERSION}" in section and "-f deploy/k8s/values.yaml" in section
    assert f"helm install {HELM_RELEASE} dagster/dagster" in section
    assert ".".join(KUBERNETES_VERSION.split(".")[:2]) in section
    for path in _manifest_files():
        assert f"deploy/k8s/{path.name}" in section, f"the Kubernetes steps never apply {path.name}"
    for name in ("dagster-postgresql-secret", "runtime-ops-secrets", "runtime-ops-prometheus"):
        assert name in section, f"the Kubernetes steps do not create the Secret {name}"
    assert "runtime_ops_tests/integration/test_k8s_deploy.py" in section
    # The ops API mounts the instance ConfigMap of exactly that release.
    volumes = _pod_spec(_by_kind("Deployment"))["volumes"]
    assert {"name": "dagster-instance", "configMap": {"name": f"{HELM_RELEASE}-instance"}} in volumes


def _main(argv: list[str]) -> Iterator[str]:
    if argv == ["--write-prometheusrule"]:
        (K8S / "prometheusrule.yaml").write_text(render_prometheus_rule())
        yield f"wrote {K8S / 'prometheusrule.yaml'}"
    else:
        yield "usage: python -m runtime_ops_tests.integration.test_k8s_deploy --write-prometheusrule"


if __name__ == "__main__":
    for line in _main(sys.argv[1:]):
        print(line)
