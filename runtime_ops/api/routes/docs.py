"""`GET /openapi.json` and `GET /docs`: the API's schema and its Swagger page, for holders of a `read` key.

FastAPI serves both to anyone by default; they name every route, parameter and internal field, so the app turns
its own off and serves them here behind the key. The Swagger page carries the schema inline, so a browser that
sends the key for the page (an extension adding the header; `?key=` is never accepted: keys do not belong in
URLs, logs and browser history) needs nothing more; from a shell:
`curl -H "Authorization: Bearer $KEY" http://127.0.0.1:8000/openapi.json`.

Swagger UI's script and stylesheet are served from here too (`/docs/assets/`, the copies the `fastapi-offline`
package ships), never from a CDN: the page works without internet access, and loads nothing a third party could
change. Its content policy allows scripts from this origin plus, by hash, the one inline script that starts
Swagger UI with the schema.
"""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path
from typing import Any

import fastapi_offline
from fastapi import APIRouter, Depends, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse

from runtime_ops.api.auth import require_scope
from runtime_ops.api.pages import FAVICON

router = APIRouter(tags=["docs"], dependencies=[Depends(require_scope("read"))])

ASSET_DIR = Path(fastapi_offline.__file__).parent / "static"
ASSETS = {"swagger-ui-bundle.js": "text/javascript; charset=utf-8", "swagger-ui.css": "text/css; charset=utf-8"}
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


@router.get("/openapi.json", include_in_schema=False)
def openapi(request: Request) -> dict[str, Any]:
    return request.app.openapi()


@router.get("/docs", include_in_schema=False)
def docs(request: Request) -> HTMLResponse:
    assets = f"{request.scope.get('root_path', '')}/docs/assets"
    page = get_swagger_ui_html(
        openapi_url="",
        title=f"{request.app.title} - docs",
        swagger_js_url=f"{assets}/swagger-ui-bundle.js",
        swagger_css_url=f"{assets}/swagger-ui.css",
        swagger_favicon_url=FAVICON,
        # validatorUrl null: no badge image fetched from swagger.io.
        swagger_ui_parameters={"spec": request.app.openapi(), "validatorUrl": None},
    )
    page.headers["content-security-policy"] = docs_policy(bytes(page.body).decode())
    return page


def docs_policy(html: str) -> str:
    """The Swagger page's content policy: this origin's assets, and its inline scripts by their SHA-256."""
    hashes = [
        "'sha256-" + base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() + "'"
        for s in _INLINE_SCRIPT.findall(html)
    ]
    if not hashes:  # FastAPI changed its page: without the hash the browser would block Swagger UI silently
        raise RuntimeError("the Swagger page has no inline script to allow; update runtime_ops.api.routes.docs")
    return (
        f"default-src 'none'; script-src 'self' {' '.join(hashes)}; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; font-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
        "form-action 'self'"
    )


def _asset_route(name: str, media_type: str) -> None:
    def asset() -> FileResponse:
        # The same bytes until the package is upgraded: a browser may keep them a day (private: behind the key).
        headers = {"cache-control": "private, max-age=86400"}
        return FileResponse(ASSET_DIR / name, media_type=media_type, headers=headers)

    router.add_api_route(f"/docs/assets/{name}", asset, methods=["GET"], include_in_schema=False)


for _name, _media_type in ASSETS.items():
    _asset_route(_name, _media_type)
