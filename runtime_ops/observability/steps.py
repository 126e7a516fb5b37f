"""The Dagster side of logs and traces: the run logger for `Definitions(loggers=...)` and `observe_step`.

- `runtime_ops_logger`: a Dagster `@logger` (registered as `console`, replacing Dagster's colored one) that
  writes every `context.log` line and every Dagster event of a run as one JSON line (or a console line) on
  stderr. Dagster's own event-log capture (what the UI shows) is a separate handler and is untouched.
- `observe_step(context)`: wraps the body of an asset or asset check: binds run_id / job / asset / step /
  partition (batch_id for landing batches, approval_id on promotion runs) to every log line, opens the step
  span (trace id = run id; linked to the approval request on a promotion run), and logs one `started` and one
  `succeeded` / `failed` line with status and duration_ms.
"""

import contextlib
import functools
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import dagster as dg
from opentelemetry.trace import SpanKind, Status, StatusCode

from runtime_ops.observability import logs, tracing
from runtime_ops.settings import get_settings
from runtime_ops.tags import APPROVAL_TAG, APPROVAL_TRACE_TAG, PIPELINE_TAG, STEP_TIMEOUT_TAG
from runtime_ops.timeouts import deadline

LANDING_PARTITIONS = "landing_batches"


# Dagster events written whatever the threshold: a step's and a run's life, materializations, check results.
LIFECYCLE_EVENTS = frozenset(
    {
        "STEP_START",
        "STEP_SUCCESS",
        "STEP_FAILURE",
        "STEP_UP_FOR_RETRY",
        "STEP_RESTARTED",
        "STEP_SKIPPED",
        "RUN_START",
        "RUN_SUCCESS",
        "RUN_FAILURE",
        "RUN_CANCELED",
        "ASSET_MATERIALIZATION",
        "ASSET_CHECK_EVALUATION",
    }
)
# Default run config of runtime_ops' jobs: Dagster only builds the loggers a run's config names, and falls
# back to its colored console logger otherwise.
RUN_LOGGER_CONFIG: dict[str, Any] = {"loggers": {"console": {"config": {"log_level": "INFO"}}}}


class _LifecycleOrLevel(logging.Filter):
    def __init__(self, threshold: int) -> None:
        super().__init__()
        self.threshold = threshold

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= self.threshold:
            return True
        meta = getattr(record, "dagster_meta", None)
        event = meta.get("dagster_event") if isinstance(meta, dict) else None
        event_type = getattr(getattr(event, "event_type", None), "value", None)
        return event_type in LIFECYCLE_EVENTS


@dg.logger(
    config_schema={
        "log_level": dg.Field(str, is_required=False, default_value="INFO", description="The logger's threshold."),
        "name": dg.Field(str, is_required=False, default_value="runtime_ops.run", description="Logger name."),
    },
    description="runtime_ops run logs: one JSON object per line (RUNTIME_OPS_LOG_FORMAT=console for humans), "
    "with run_id, step/asset, status and duration_ms, secrets redacted.",
)
def runtime_ops_logger(init_context: dg.InitLoggerContext) -> logging.Logger:
    config = init_context.logger_config
    level = logging.getLevelName(str(config["log_level"]).upper())
    threshold = level if isinstance(level, int) else logging.INFO
    # Not registered with logging.getLogger: Dagster calls it directly, and it must not propagate to root.
    # Its own level stays at DEBUG so the step and run events Dagster logs at DEBUG (STEP_SUCCESS carries the
    # duration) get through; everything else is held to the configured threshold by the filter.
    logger = logging.Logger(str(config["name"]), level=logging.DEBUG)
    handler = logs.StderrHandler(logs.formatter_for())
    handler.addFilter(_LifecycleOrLevel(threshold))
    logger.addHandler(handler)
    logger.propagate = False
    logs.install_record_factory()
    return logger


def default_for_unconfigured_runs() -> bool:
    """Make `runtime_ops_logger` the logger of runs whose run config names no logger.

    Dagster builds a `Definitions(loggers=...)` logger only when the run config mentions it; every other run
    (declarative automation, the implicit asset job, a materialization started in the UI) gets the colored
    console logger from `default_system_loggers`. The jobs we define carry RUN_LOGGER_CONFIG; for the rest
    this swaps the fallback in the one module that builds run loggers (dagster 1.13.27,
    `context_creation_job`), in the processes that load this code location. Returns False, changing nothing,
    when that module no longer has the hook (a Dagster upgrade; a test pins the behaviour).
    """
    from dagster._core.execution import context_creation_job as ccj

    current = getattr(ccj, "default_system_loggers", None)
    if current is None:
        return False
    if getattr(current, "runtime_ops", False):
        return True

    def runtime_ops_system_loggers(instance: Any) -> list[tuple[dg.LoggerDefinition, dict[str, Any]]]:
        return [(runtime_ops_logger, {"log_level": "INFO", "name": "runtime_ops.run"})]

    runtime_ops_system_loggers.runtime_ops = True  # type: ignore[attr-defined]
    ccj.default_system_loggers = runtime_ops_system_loggers  # type: ignore[assignment]
    return True


def _current_context() -> Any:
    for getter in (dg.AssetExecutionContext.get, dg.AssetCheckExecutionContext.get, dg.OpExecutionContext.get):
        try:
            return getter()
        except Exception:
            continue
    raise RuntimeError("observe_step() outside a Dagster step and without a context")


def _step_facts(context: Any) -> dict[str, Any]:
    """run_id, job, step, asset (or check), partition of the step `context` belongs to."""
    step_ctx = context.get_step_execution_context()
    run = step_ctx.dagster_run
    facts: dict[str, Any] = {
        "run_id": run.run_id,
        "job": run.job_name,
        "step": step_ctx.step.key,
        "tags": dict(run.tags),
    }
    if isinstance(context, dg.AssetCheckExecutionContext):
        spec = context.check_specs[0] if context.check_specs else None
        if spec is not None:
            facts["asset"] = spec.asset_key.to_user_string()
            facts["check"] = spec.name
    else:
        try:
            keys = list(context.selected_asset_keys or [])
        except Exception:  # an op that is not an asset
            keys = []
        if keys:
            facts["asset"] = keys[0].to_user_string() if len(keys) == 1 else ",".join(k.to_user_string() for k in keys)
    assets_def = step_ctx.assets_def
    partitions_def = assets_def.partitions_def if assets_def is not None else None
    if partitions_def is not None and step_ctx.has_partition_key:
        facts["partition"] = step_ctx.partition_key
        if str(getattr(partitions_def, "name", "")).endswith(LANDING_PARTITIONS):  # `<pipeline>__landing_batches`
            facts["batch_id"] = step_ctx.partition_key
    if facts["tags"].get(APPROVAL_TAG):
        facts["approval_id"] = facts["tags"][APPROVAL_TAG]
    if facts["tags"].get(PIPELINE_TAG):
        facts["pipeline"] = facts["tags"][PIPELINE_TAG]
    return facts


@contextlib.contextmanager
def observe_step(context: Any = None, **fields: Any) -> Iterator[Any]:
    """Wrap a step body: bound log fields, the step span, and `started` / `succeeded` | `failed` lines.

    `context` defaults to the current Dagster step's; `fields` are bound to every line (e.g. batch_id) and
    set on the span. Yields the span (the body may add attributes).
    """
    context = context or _current_context()
    facts = _step_facts(context)
    tags = facts.pop("tags")
    name = facts.get("check") or facts.get("asset") or facts["step"]
    bound = {k: v for k, v in {**facts, **fields}.items() if k != "check"}
    attributes: dict[str, Any] = {
        "dagster.run_id": facts["run_id"],
        "dagster.job": facts["job"],
        "dagster.step_key": facts["step"],
        "dagster.asset_key": facts.get("asset"),
        "dagster.asset_check": facts.get("check"),
        "dagster.partition_key": facts.get("partition"),
        "runtime_ops.pipeline": bound.get("pipeline"),
        "runtime_ops.batch_id": bound.get("batch_id"),
        "approval.id": bound.get("approval_id"),
        **{f"runtime_ops.{k}": v for k, v in fields.items() if isinstance(v, str | int | float | bool)},
    }
    links = tracing.link_from(tags.get(APPROVAL_TRACE_TAG), **{"approval.id": facts.get("approval_id")})
    log = context.log
    started = time.perf_counter()
    with (
        logs.bind(**bound),
        tracing.run_trace(facts["run_id"]),
        tracing.new_root(),
        tracing.tracer().start_as_current_span(
            f"step {name}",
            kind=SpanKind.INTERNAL,
            attributes={k: v for k, v in attributes.items() if v is not None},
            links=links,
            record_exception=False,
            set_status_on_exception=False,
        ) as span,
    ):
        log.info(f"{name} started", extra={"status": "started"})
        try:
            yield span
        except BaseException as exc:
            duration_ms = round((time.perf_counter() - started) * 1000, 1)
            # RetryRequested is Dagster's way to ask for another attempt, not a failure of the code.
            status = "retrying" if isinstance(exc, dg.RetryRequested) else "failed"
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:300]))
            span.set_attribute("runtime_ops.status", status)
            (log.warning if status == "retrying" else log.error)(
                f"{name} {status} after {duration_ms} ms: {type(exc).__name__}: {exc}",
                extra={"status": status, "duration_ms": duration_ms, "error": type(exc).__name__},
            )
            raise
        duration_ms = round((time.perf_counter() - started) * 1000, 1)
        span.set_attribute("runtime_ops.status", "succeeded")
        log.info(f"{name} succeeded in {duration_ms} ms", extra={"status": "succeeded", "duration_ms": duration_ms})


_CONTEXT_TYPES = (dg.AssetExecutionContext, dg.AssetCheckExecutionContext, dg.OpExecutionContext)


def step_timeout(context: Any) -> float | None:
    """Seconds the step may take: its run's STEP_TIMEOUT_TAG (set per job), else RUNTIME_OPS_STEP_TIMEOUT."""
    tag = context.run.tags.get(STEP_TIMEOUT_TAG)
    if tag is not None:
        seconds = float(tag)
        return seconds if seconds > 0 else None
    default = get_settings().step_timeout
    return default.total_seconds() if default else None


def observed(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`observe_step` around a whole asset / check / op function, keeping its signature (Dagster reads the
    wrapped function's parameters and annotations through `functools.wraps`), bounded by the step timeout. Put it
    under `@dg.asset`."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        found = next((a for a in (*args, *kwargs.values()) if isinstance(a, _CONTEXT_TYPES)), None)
        context = found or _current_context()
        with observe_step(context):
            seconds = step_timeout(context)
            key = context.get_step_execution_context().step.key
            with deadline(seconds, f"step {key}") as bound:
                if seconds and not bound.armed:
                    context.log.warning(
                        f"step timeout of {seconds:g} s not enforced: the step does not run on its process's main "
                        "thread"
                    )
                return fn(*args, **kwargs)

    return wrapper
