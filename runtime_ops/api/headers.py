"""Security headers on every response of the ops API (JSON, pages, errors), and HSTS when it is served over https.

Every response gets `X-Content-Type-Options: nosniff`, `X-Frame-Options: DENY`, `Referrer-Policy: no-referrer`,
`Cache-Control: no-store` (unless the route set its own) and a Content-Security-Policy:

- approval pages (`/approvals/`): only their own inline style, an inline icon and a form posting back to
  themselves; nothing a route sets can loosen it (the page carries a decision and its URL a signed token);
- a route may set its own policy (the Swagger page, `/docs`, allows its local assets);
- everything else (JSON): `default-src 'none'`, so a response that a browser renders anyway runs nothing.

`Strict-Transport-Security` is sent when RUNTIME_OPS_PUBLIC_URL is https, or the request itself came over https
(TLS, or a trusted proxy's `X-Forwarded-Proto`, see FORWARDED_ALLOW_IPS): never over plain http on its own, where
a browser ignores it and a local `make dev` would be pinned to https.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

HSTS = (b"strict-transport-security", b"max-age=31536000")
PAGE_PREFIX = "/approvals/"

# img-src: the pages' icon is an inline data: URL (there is no unauthenticated /favicon.ico to fetch).
PAGE_POLICY = (
    b"default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; frame-ancestors 'none'; "
    b"base-uri 'none'"
)
API_POLICY = b"default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

ALWAYS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
)
# What a route may set itself (the Swagger page's policy, its assets' caching); these are only defaults.
DEFAULTS: tuple[tuple[bytes, bytes], ...] = (
    (b"cache-control", b"no-store"),
    (b"content-security-policy", API_POLICY),
)
PAGE_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    *ALWAYS,
    (b"cache-control", b"no-store"),
    (b"content-security-policy", PAGE_POLICY),
)


class SecurityHeaders:
    """ASGI middleware adding the headers above; `https_public`: RUNTIME_OPS_PUBLIC_URL is https (send HSTS)."""

    def __init__(self, app: ASGIApp, *, https_public: bool) -> None:
        self.app, self.https_public = app, https_public

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        page = scope.get("path", "").startswith(PAGE_PREFIX)
        hsts = self.https_public or scope.get("scheme") == "https"

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": self.headers(list(message.get("headers", [])), page, hsts)}
            await send(message)

        await self.app(scope, receive, with_headers)

    @staticmethod
    def headers(headers: list[tuple[bytes, bytes]], page: bool, hsts: bool) -> list[tuple[bytes, bytes]]:
        forced = PAGE_HEADERS if page else ALWAYS
        forced_names = {name for name, _ in forced}
        kept = [(n, v) for n, v in headers if n.lower() not in forced_names]
        present = {n.lower() for n, _ in kept}
        added = [(n, v) for n, v in DEFAULTS if n not in present and n not in forced_names]
        return [*kept, *forced, *added, *([HSTS] if hsts and b"strict-transport-security" not in present else [])]
