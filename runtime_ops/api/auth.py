"""Scoped API keys on the ops API's routes: `require_scope(scope)` is the FastAPI dependency.

    from runtime_ops.api.auth import SearchKey, require_scope

    @router.post("/api/search")
    def search(body: SearchBody, key: SearchKey) -> JSONResponse:  # SearchKey: Annotated[ApiKey, Depends(...)]
        log.info("search", extra={"api_key": key.key_id, "api_key_name": key.name})

    router = APIRouter(dependencies=[Depends(require_scope("read"))])  # every route of a router

The key comes in `Authorization: Bearer <key>` or `X-API-Key: <key>` (keys are made with `runtime-ops keys create`,
see `runtime_ops.store.operations.api_keys`). No key, a malformed header, an unknown or revoked key: 401 with
`WWW-Authenticate: Bearer`. A live key without the scope: 403 (`error="insufficient_scope"`). Otherwise the route
gets the key's `ApiKey` record (key id, name, scopes; never the secret), also left on `request.state.api_key`.
An `admin` key has every scope. The store is down: 503, the route does not run.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from runtime_ops.api.deps import OpsContext, OpsDep
from runtime_ops.store.operations.api_keys import SCOPES, ApiKey, key_id_of

__all__ = [
    "API_KEY_HEADER",
    "SCOPES",
    "AdminKey",
    "ApiKey",
    "DecideKey",
    "ReadKey",
    "SearchKey",
    "require_scope",
]

API_KEY_HEADER = "X-API-Key"
log = logging.getLogger("runtime_ops.api.auth")

# Declared through FastAPI's security classes so that the OpenAPI schema (and /docs' Authorize button) shows both
# ways in; auto_error=False because the refusals below are ours (401 with a reason, 403 for a missing scope).
_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="ApiKeyBearer",
    description="An ops API key (`runtime-ops keys create`): `Authorization: Bearer rok_...`",
)
_header = APIKeyHeader(name=API_KEY_HEADER, auto_error=False, scheme_name="ApiKeyHeader")
BearerDep = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
HeaderDep = Annotated[str | None, Depends(_header)]

ScopeDependency = Callable[..., Coroutine[Any, Any, ApiKey]]


def _unauthenticated(reason: str) -> HTTPException:
    return HTTPException(
        401,
        f"{reason}; send an API key as 'Authorization: Bearer <key>' or '{API_KEY_HEADER}: <key>'",
        headers={"WWW-Authenticate": "Bearer"},
    )


async def _refuse(request: Request, ops: OpsContext, status: int, reason: str, key_id: str | None) -> None:
    """Log and audit (in aggregate) a refused credential; a client over its failure limit gets 429 instead."""
    client = request.client.host if request.client else None
    path = request.url.path
    log.info(
        "api key refused: %s", reason, extra={"http_status": status, "api_key": key_id, "path": path, "client": client}
    )
    detail = {"reason": reason, "path": path, "api_key": key_id, "http_status": status}
    outcome = "forbidden" if status == 403 else "unauthenticated"
    retry = await run_in_threadpool(ops.refusals.refused, channel="api", outcome=outcome, client=client, detail=detail)
    if retry is not None:
        raise too_many(retry)


def too_many(retry_after: int) -> HTTPException:
    return HTTPException(
        429,
        f"too many failed authentications from this client; retry in {retry_after} s",
        headers={"Retry-After": str(retry_after)},
    )


@functools.cache  # one callable per scope: FastAPI then checks a key once per request however often it is required
def require_scope(scope: str) -> ScopeDependency:
    """The dependency that admits a request carrying a live API key with `scope` and returns the key's record.

    Use it as `key: Annotated[ApiKey, Depends(require_scope("search"))]` (or the `SearchKey`, `ReadKey`, ...
    aliases), or in `dependencies=[Depends(require_scope("read"))]` of a route or router. An unknown scope raises
    ValueError when the route is declared."""
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}; valid scopes: {', '.join(SCOPES)}")

    async def dependency(request: Request, ops: OpsDep, bearer: BearerDep, header: HeaderDep) -> ApiKey:
        given = [v.strip() for v in (bearer.credentials if bearer else None, header) if v and v.strip()]
        if not given:
            if request.headers.get("authorization"):
                await _refuse(request, ops, 401, "malformed Authorization header", None)
                raise _unauthenticated("malformed Authorization header (expected 'Bearer <key>')")
            await _refuse(request, ops, 401, "no API key", None)
            raise _unauthenticated("no API key")
        if len(given) == 2 and given[0] != given[1]:
            await _refuse(request, ops, 401, "two different API keys", None)
            raise _unauthenticated(f"two different API keys (Authorization and {API_KEY_HEADER})")
        key = given[0]
        try:
            found = await run_in_threadpool(ops.store.api_keys.verify, key, now=ops.now())
        except Exception as exc:
            log.exception("api key check failed", extra={"api_key": key_id_of(key)})
            raise HTTPException(503, f"cannot check the API key now ({type(exc).__name__}); retry later") from None
        if found is None:
            await _refuse(request, ops, 401, "unknown or revoked API key", key_id_of(key))
            raise _unauthenticated("unknown or revoked API key")
        if not found.allows(scope):
            await _refuse(request, ops, 403, f"API key lacks scope {scope}", found.key_id)
            raise HTTPException(
                403,
                f"API key {found.key_id} lacks the {scope!r} scope (it has: {', '.join(found.scopes)})",
                headers={"WWW-Authenticate": f'Bearer error="insufficient_scope", scope="{scope}"'},
            )
        request.state.api_key = found
        return found

    dependency.__name__ = dependency.__qualname__ = f"require_scope_{scope}"
    return dependency


ReadKey = Annotated[ApiKey, Depends(require_scope("read"))]
DecideKey = Annotated[ApiKey, Depends(require_scope("decide"))]
SearchKey = Annotated[ApiKey, Depends(require_scope("search"))]
AdminKey = Annotated[ApiKey, Depends(require_scope("admin"))]
