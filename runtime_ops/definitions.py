"""The one Definitions object of the runtime_ops code location (`dg dev`, the other dg commands, gRPC code server).

Every pipeline is a `RetrievalPipeline` component declared in `<pipelines dir>/<name>/defs.yaml` (default:
`runtime_ops/defs/`, or RUNTIME_OPS_PIPELINES_DIR); the process-wide pieces live here: the state store, locks,
landing access, approval announcements, the run logger, the automation sensor and the run recovery sensor.
"""

from __future__ import annotations

import warnings

import dagster as dg

from runtime_ops.automation import build_automation_sensor
from runtime_ops.components.loading import BUILTIN_DEFS, load_pipelines
from runtime_ops.observability.interrupts import quiet_unraisable_interrupts
from runtime_ops.observability.logs import configure_logging
from runtime_ops.observability.steps import default_for_unconfigured_runs, runtime_ops_logger
from runtime_ops.recovery.sensor import build_recovery_sensor
from runtime_ops.recovery.stalls import dump_stacks_on_signal
from runtime_ops.resources.approvals import ApprovalsResource
from runtime_ops.resources.configured import configured_url
from runtime_ops.resources.inference import InferenceEndpointResource
from runtime_ops.resources.landing import LandingResource
from runtime_ops.resources.locks import LocksResource
from runtime_ops.resources.state_store import StateStoreResource
from runtime_ops.settings import Settings, get_settings


def build_resources(settings: Settings) -> dict[str, dg.ConfigurableResource]:
    database_url = configured_url(settings.database_url, "RUNTIME_OPS_DATABASE_URL", settings.resolved_database_url)
    return {
        "state": StateStoreResource(database_url=database_url),
        "locks": LocksResource(redis_url=configured_url(settings.redis_url, "REDIS_URL"), database_url=database_url),
        "landing": LandingResource(endpoint_url=settings.aws_endpoint_url),
        "approvals": ApprovalsResource(
            public_url=settings.public_url,
            dagster_url=settings.dagster_url,
            slack_api_url=settings.slack_api_url,
        ),
        # The key is a secret: only ever the variable's name (a literal would be rendered in the UI).
        "inference": InferenceEndpointResource(
            url=settings.inference_url,
            api_key=dg.EnvVar("RUNTIME_OPS_INFERENCE_API_KEY") if settings.inference_api_key else None,
        ),
    }


# Steps run in their own processes (Dagster's multiprocess executor), forked from a forkserver that has imported
# the code location once per run: Dagster's default ("spawn") re-imports runtime_ops and Dagster in every step,
# about 3 s of CPU each, which for a 9-step train run cost more than the steps' own work.
STEP_EXECUTOR = dg.multiprocess_executor.configured(
    {"start_method": {"forkserver": {"preload_modules": ["runtime_ops.definitions"]}}}, name="multiprocess_forkserver"
)


def build_definitions(settings: Settings | None = None) -> dg.Definitions:
    settings = settings or get_settings()
    # Every process that loads the code location (run workers, the daemon's sensors, the code server) writes
    # runtime_ops.* Python logs through the same formatter and redaction as the run logs.
    configure_logging(fmt=settings.log_format)
    quiet_unraisable_interrupts()  # a Ctrl-C of `make dev` inside a run worker's cleanup callback: one line
    dump_stacks_on_signal()  # what a hung run worker was doing, in its log, before run_recovery_sensor kills it
    default_for_unconfigured_runs()
    pipelines = load_pipelines(settings.pipelines_dir or BUILTIN_DEFS, settings)
    shared = dg.Definitions(
        sensors=[
            build_automation_sensor(settings.sensor_seconds(30)),
            build_recovery_sensor(settings.sensor_seconds(30), settings.run_stall_timeout),
        ],
        resources=build_resources(settings),
        # Run logs as JSON lines (console lines in `make dev`); Dagster's event log (the UI) is unaffected.
        loggers={"console": runtime_ops_logger},
        executor=STEP_EXECUTOR,
    )
    defs = dg.Definitions.merge(shared, pipelines)
    with warnings.catch_warnings():
        # Resolving these definitions, Dagster passes its own beta parameters: `owners` when it copies alert_sensor
        # to bind its op jobs (rollback_job, reembed_job) to the resources above, `execution_type` when it turns
        # back into AssetChecksDefinition the asset checks that the component machinery returns as plain
        # AssetsDefinition. Neither is ours to act on, and every process loading the code location (the code
        # server on `make dev`'s console) printed both; resolved here, where they are silenced, and cached.
        for param in ("owners", "execution_type"):
            warnings.filterwarnings("ignore", message=f"Parameter `{param}` of ", category=dg.BetaWarning)
        defs.get_repository_def().asset_graph  # noqa: B018
    return defs


defs = build_definitions()
