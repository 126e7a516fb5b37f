"""`POST /webhooks/landing`: documents from systems that cannot write to the bucket.

The objects are written into the landing folder or bucket, so they reach the ledger through the landing sensor
like any other object (one ingestion per version). Authenticated with a shared secret header, checked before the
body is read; the body must be JSON (415 otherwise, also before it is read). Every key is checked with the
landing's own rules before anything is written, a key a local landing will not follow (a symbolic link on its
path) included, and the request lands whole or not at all (`runtime_ops.landing.transaction`). Every refusal
after the token is one INFO line (`landing webhook refused: ...`) with its status, like the app's other refusals.
"""

from __future__ import annotations

import base64
import binascii
import email.message
import hmac
import json
import logging
from typing import Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, ValidationError, model_validator
from starlette.concurrency import run_in_threadpool

from runtime_ops.api.deps import RefusalsDep, SettingsDep, StoreDep
from runtime_ops.components.loading import PipelineConfigError, get_spec
from runtime_ops.landing import UnsafePath, open_landing
from runtime_ops.landing.transaction import RefusedKeys, write_all

HEADER = "X-Runtime-Ops-Token"
log = logging.getLogger("runtime_ops.api.landing")
router = APIRouter(tags=["landing"])


class LandingObject(BaseModel):
    key: str = Field(min_length=1, max_length=1024)
    content: str | None = None  # UTF-8 text
    content_base64: str | None = None  # any bytes (e.g. a PDF)

    @model_validator(mode="after")
    def _one_content(self) -> LandingObject:
        if (self.content is None) == (self.content_base64 is None):
            raise ValueError("give exactly one of content or content_base64")
        return self

    def data(self) -> bytes:
        if self.content is not None:
            return self.content.encode()
        try:
            return base64.b64decode(self.content_base64 or "", validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"{self.key}: content_base64 is not valid base64") from None


class LandingRequest(BaseModel):
    objects: list[LandingObject] = Field(default_factory=list, max_length=1000)
    # Keys to delete from the landing: their documents stop being current and leave the serving indexes.
    deleted: list[str] = Field(default_factory=list, max_length=1000)

    @model_validator(mode="after")
    def _something(self) -> LandingRequest:
        if not self.objects and not self.deleted:
            raise ValueError("give objects to land, keys to delete, or both")
        return self


@router.post("/webhooks/landing")
async def land(
    request: Request,
    settings: SettingsDep,
    store: StoreDep,
    refusals: RefusalsDep,
    token: str | None = Header(None, alias=HEADER),
    pipeline: str | None = Query(None, description="the pipeline whose landing receives the objects"),
) -> JSONResponse:
    # The secret is checked before the body is read (the body's size is bounded by the app's BodyLimit first).
    secret = settings.webhook_secret.get_secret_value() if settings.webhook_secret else None
    if not secret:
        return JSONResponse({"error": "webhook landing is disabled: set RUNTIME_OPS_WEBHOOK_SECRET"}, 404)
    if token is None or not hmac.compare_digest(token.encode(), secret.encode()):
        client = request.client.host if request.client else None
        detail = {"reason": f"missing or wrong {HEADER} header"}
        retry = await run_in_threadpool(
            refusals.refused, channel="landing", outcome="unauthenticated", client=client, detail=detail
        )
        if retry is not None:
            return JSONResponse({"error": "too many failed authentications"}, 429, {"Retry-After": str(retry)})
        return JSONResponse({"error": f"missing or wrong {HEADER} header"}, 401)
    content_type = request.headers.get("content-type")
    if not _is_json(content_type):
        given = f"Content-Type {content_type[:100]!r}" if content_type else "no Content-Type"
        return _refuse(415, f"the body must be JSON: send Content-Type: application/json ({given} given)")
    try:
        payload = json.loads(await request.body())
        parsed = LandingRequest.model_validate(payload)
        blobs = [(o.key, o.data()) for o in parsed.objects]
    except RecursionError:
        return _refuse(400, "invalid landing request: JSON nested too deeply")
    except (ValidationError, ValueError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return _refuse(400, f"invalid landing request: {exc}")
    return await run_in_threadpool(_land, settings, store, pipeline, blobs, parsed.deleted)


def _is_json(content_type: str | None) -> bool:
    """`application/json` or a `+json` type (RFC 6839), parameters allowed: the rule FastAPI applies to JSON bodies."""
    if not content_type:
        return False
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))


def _refuse(status: int, error: str, **more: Any) -> JSONResponse:
    """A request the webhook will not take, answered and logged (the token was right: no failure is counted)."""
    problems = more.get("problems") or []
    said = "; ".join([error, *problems])
    said = said if len(said) <= 500 else said[:500] + "..."  # a long body's validation error is in the answer
    log.info("landing webhook refused: %s", said, extra={"path": "/webhooks/landing", "http_status": status})
    return JSONResponse({"error": error, **more}, status)


def _land(
    settings: Any, store: Any, pipeline: str | None, blobs: list[tuple[str, bytes]], deletes: list[str]
) -> JSONResponse:
    try:
        spec = get_spec(pipeline, settings)
    except PipelineConfigError as exc:
        return _refuse(404 if pipeline else 400, f"{exc}; name it with ?pipeline=")
    max_bytes = spec.landing.max_document_bytes
    too_big = [k for k, b in blobs if len(b) > max_bytes]
    if too_big:
        limit = f"landing.max_document_bytes of pipeline {spec.name} ({max_bytes})"
        return _refuse(413, f"over {limit}: {too_big}")
    source = open_landing(spec.landing.uri, endpoint_url=settings.aws_endpoint_url)
    # Every key is checked (and what it replaces stashed) before anything is written: all objects land, or none.
    try:
        written = write_all(source, blobs, deletes)
    except RefusedKeys as exc:
        return _refuse(400, "nothing landed: keys the landing cannot take", problems=exc.problems)
    except UnsafePath as exc:  # a link appeared on the key's path after the check: undone, and no retry helps
        return _refuse(400, "nothing landed: keys the landing cannot take", problems=[str(exc)])
    except Exception as exc:
        log.exception("landing webhook write failed; undone")
        return JSONResponse({"error": f"nothing landed: writing failed ({type(exc).__name__}); retry later"}, 503)
    landed = [{"key": r.key, "version": r.version, "size": r.size} for r in written.landed]
    deleted = []
    documents = store.scoped(spec.name).documents
    for key, existed in written.deleted:
        # Gone from the landing now; a failure here is caught up by the next listing sweep.
        document = documents.remove_key(key, reason="deleted through the landing webhook")
        deleted.append({"key": key, "object_deleted": existed, "document_removed": document is not None})
    return JSONResponse({"pipeline": spec.name, "landed": landed, "deleted": deleted}, 202)
