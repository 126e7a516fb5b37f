"""`POST /webhooks/landing`: documents from systems that cannot write to the bucket.

The objects are written into the landing folder or bucket, so they reach the ledger through the landing sensor
like any other object (one ingestion per version). Authenticated with a shared secret header.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from typing import Any

from fastapi import APIRouter, Header, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, ValidationError, model_validator

from runtime_ops.api.deps import SettingsDep, StoreDep
from runtime_ops.landing import is_ignored_key, open_landing

HEADER = "X-Runtime-Ops-Token"
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
def land(
    payload: dict[str, Any],
    settings: SettingsDep,
    store: StoreDep,
    token: str | None = Header(None, alias=HEADER),
    pipeline: str | None = Query(None, description="the pipeline whose landing receives the objects"),
) -> JSONResponse:
    secret = settings.webhook_secret.get_secret_value() if settings.webhook_secret else None
    if not secret:
        return JSONResponse({"error": "webhook landing is disabled: set RUNTIME_OPS_WEBHOOK_SECRET"}, 404)
    if token is None or not hmac.compare_digest(token.encode(), secret.encode()):
        return JSONResponse({"error": f"missing or wrong {HEADER} header"}, 401)
    from runtime_ops.components.loading import PipelineConfigError, get_spec

    try:
        spec = get_spec(pipeline, settings)
    except PipelineConfigError as exc:
        return JSONResponse({"error": f"{exc}; name it with ?pipeline="}, 404 if pipeline else 400)
    max_bytes = spec.landing.max_document_bytes
    try:
        request = LandingRequest.model_validate(payload)
        blobs = [(o.key, o.data()) for o in request.objects]
    except (ValidationError, ValueError) as exc:
        return JSONResponse({"error": f"invalid landing request: {exc}"}, 400)
    too_big = [k for k, b in blobs if len(b) > max_bytes]
    if too_big:
        limit = f"landing.max_document_bytes of pipeline {spec.name} ({max_bytes})"
        return JSONResponse({"error": f"over {limit}: {too_big}"}, 413)
    source = open_landing(spec.landing.uri, endpoint_url=settings.aws_endpoint_url)
    # Validate every key before writing any, so a bad key leaves nothing half-landed.
    keys = [k for k, _ in blobs] + request.deleted
    bad = [k for k in keys if not k or is_ignored_key(k) or ".." in k.split("/") or k.startswith("/")]
    if bad:
        return JSONResponse({"error": f"keys the landing would ignore or that escape it: {bad}"}, 400)
    landed = []
    for key, data in blobs:
        try:
            ref = source.put(key, data)
        except ValueError as exc:
            return JSONResponse({"error": str(exc), "landed": landed}, 400)
        landed.append({"key": ref.key, "version": ref.version, "size": ref.size})
    deleted = []
    if request.deleted:
        documents = store.scoped(spec.name).documents
        for key in request.deleted:
            try:
                removed_object = source.delete(key)
            except ValueError as exc:
                return JSONResponse({"error": str(exc), "landed": landed, "deleted": deleted}, 400)
            document = documents.remove_key(key, reason="deleted through the landing webhook")
            deleted.append({"key": key, "object_deleted": removed_object, "document_removed": document is not None})
    return JSONResponse({"pipeline": spec.name, "landed": landed, "deleted": deleted}, 202)
