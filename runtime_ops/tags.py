"""Run tags (`runtime_ops/*`) and registry alias names (production, candidate, ...): each spelled once, here.

Pure constants, no imports: a base-layer module every layer may read. A run tag's value is what the UI shows and
what sensors, run queues (dagster.yaml's tag concurrency limits) and metrics filter on, so renaming one changes
behaviour; the names here are the code's handle on them.
"""

# --- Run tags -------------------------------------------------------------------------------------------------

# The pipeline a run belongs to: every job of a pipeline carries it (the `pipeline` label of run metrics; runs
# without it are "none").
PIPELINE_TAG = "runtime_ops/pipeline"
# One lifecycle run (train, promotion, index, rollback, re-embed) at a time per pipeline: dagster.yaml limits
# this tag to 1 per unique value.
LIFECYCLE_TAG = "runtime_ops/lifecycle"
# Ingestion runs of a pipeline (docker/dagster.yaml lets 4 per pipeline run at once).
INGEST_TAG = "runtime_ops/ingest"
# Each step's timeout in seconds (`0`: unbounded): jobs get it from their pipeline's `timeouts`, and
# `observability.steps.observed` arms it around every step of the run.
STEP_TIMEOUT_TAG = "runtime_ops/step_timeout_s"

# The approval request a promotion run carries out (the approvals sensor launches the run for a request).
APPROVAL_TAG = "runtime_ops/approval_id"
# The trace context of the approval request, so the promotion run's spans join the request's trace.
APPROVAL_TRACE_TAG = "runtime_ops/approval_trace"

# What made the corpus sensor retrain (first_model | alert | manual | drift | oov | growth) and the decision's key.
RETRAIN_TRIGGER_TAG = "runtime_ops/retrain_trigger"
RETRAIN_KEY_TAG = "runtime_ops/retrain_key"

# The model version a backfill (re-embed) run embeds for; without it, the candidate.
MODEL_VERSION_TAG = "runtime_ops/model_version"

# A landing batch's ingestion run: the batch id and how many objects it holds.
BATCH_TAG = "runtime_ops/batch_id"
OBJECTS_TAG = "runtime_ops/objects"

# The tag an alert's remediation run carries: the alert's run key (the alert sensor sets it; the gate reads
# who requested a retrain from the alert it names).
ALERT_TAG = "runtime_ops/alert"
# The alert's name, Alertmanager fingerprint and the rule that matched it, on the remediation run.
ALERTNAME_TAG = "runtime_ops/alertname"
ALERT_FINGERPRINT_TAG = "runtime_ops/alert_fingerprint"
ALERT_RULE_TAG = "runtime_ops/alert_rule"
# The rollback approval request a rollback run carries out.
ROLLBACK_APPROVAL_TAG = "runtime_ops/rollback_approval_id"

# --- Registry alias names ------------------------------------------------------------------------------------
# A pipeline's registry aliases (store/registry/registry.py): which model version serves, which one was trained last,
# which vector index answers queries, the question set evaluations use (and the set of production queries reported
# beside it), and the canary a gate may set.
PRODUCTION_ALIAS = "production"
CANDIDATE_ALIAS = "candidate"
SERVING_INDEX_ALIAS = "retrieval_index"
QUESTION_SET_ALIAS = "question_set"
PRODUCTION_QUERIES_ALIAS = "production_queries"
CANARY_ALIAS = "canary"
