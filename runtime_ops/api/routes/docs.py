"""`GET /openapi.json` and `GET /docs`: the API's schema and its Swagger page, for holders of a `read` key.

FastAPI serves both to anyone by default; they name every route, parameter and internal field, so the app turns
its own off and serves them here behind the key. The Swagger page carries the schema inline, so a browser that
sends the key for the page (an extension adding the header; `?key=` is never accepted: keys do not belong in
URLs, logs and browser history) needs nothing more; from a shell:
`curl -H "Authorization: Bearer $KEY" http://127.0.0.1:8000/openapi.json`.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse

from runtime_ops.api.auth import require_scope

router = APIRouter(tags=["docs"], dependencies=[Depends(require_scope("read"))])


@router.get("/openapi.json", include_in_schema=False)
def openapi(request: Request) -> dict[str, Any]:
    return request.app.openapi()


@router.get("/docs", include_in_schema=False)
def docs(request: Request) -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url="", title=f"{request.app.title} - docs", swagger_ui_parameters={"spec": request.app.openapi()}
    )
