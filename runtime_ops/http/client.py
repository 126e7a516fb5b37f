"""`call_with_retries`: run one HTTP request under a `Backoff` policy.

Each attempt is classified (`retry.classify`): a 2xx (that passes `check`) is returned; a non-retryable
answer (a 4xx other than 429) raises `EndpointError` at once; a transient failure (429, 5xx, connection
error, timeout, truncated body) waits and tries again — `Retry-After` when the server sent one, otherwise
the policy's jittered delay, both capped at `max_delay_s` — until `max_attempts` is reached or the next
wait would end past `max_total_s`, and then raises `EndpointError` naming the endpoint, the attempts made
and the last problem.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable
from typing import Any

import httpx

from runtime_ops.http.retry import Backoff, classify

log = logging.getLogger(__name__)

_shared_rng = random.Random()
_BODY_EXCERPT = 200


class EndpointError(RuntimeError):
    """An HTTP endpoint could not be used. The message names the endpoint (`what`), the attempts made and
    the last problem; it never carries credentials.

    `status` is the last HTTP status (None: no response), `retryable` whether the last problem was a
    transient one (True: we gave up retrying; False: not retried), `delays` the waits slept between attempts.
    """

    def __init__(
        self,
        message: str,
        *,
        what: str,
        attempts: int,
        status: int | None,
        retryable: bool,
        problem: str,
        delays: list[float],
        elapsed_s: float,
    ) -> None:
        super().__init__(message)
        self.what = what
        self.attempts = attempts
        self.status = status
        self.retryable = retryable
        self.problem = problem
        self.delays = delays
        self.elapsed_s = elapsed_s


def _redact(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def _describe(status: int | None, exc: BaseException | None, response: httpx.Response | None) -> str:
    if status is not None and not 200 <= status < 300 and response is not None:
        reason = response.reason_phrase or ""
        problem = f"HTTP {status} {reason}".rstrip()
        try:
            body = response.text.strip()
        except Exception:  # an undecodable error body is not worth failing over
            body = ""
        if body:
            body = " ".join(body.split())
            problem += f": {body[:_BODY_EXCERPT]}{'…' if len(body) > _BODY_EXCERPT else ''}"
        return problem
    if exc is not None:
        detail = str(exc) or repr(exc)
        prefix = f"HTTP {status} with " if status is not None else ""
        return f"{prefix}{type(exc).__name__}: {detail}"
    return f"HTTP {status}"


def call_with_retries(
    send: Callable[[], httpx.Response],
    *,
    what: str,
    backoff: Backoff,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    rng: random.Random | None = None,
    on_retry: Callable[[int, float, str], None] | None = None,
    check: Callable[[httpx.Response], object] | None = None,
    redact: Iterable[str] = (),
) -> httpx.Response:
    """Call `send()` until it yields a usable response, under `backoff`.

    - `what`: how errors name the endpoint (its URL without credentials).
    - `check(response)`: validates a 2xx (e.g. parses its JSON); raising `InvalidResponse(transient=True)`,
      `json.JSONDecodeError` or another transient error retries, any other exception fails.
    - `on_retry(attempt, delay_s, problem)`: called before each wait (attempt = the one that just failed).
    - `redact`: strings (API keys) scrubbed from every error message, in case a server echoes them.
    - `sleep`, `clock`, `rng`: injectable for tests.
    Raises `EndpointError`; exceptions other than transport errors (programming errors) propagate as-is.
    """
    rng = rng or _shared_rng
    secrets = tuple(s for s in redact if s)
    delays: list[float] = []
    started = clock()
    attempt = 0
    while True:
        attempt += 1
        response: httpx.Response | None = None
        exc: BaseException | None = None
        try:
            response = send()
        except (httpx.TransportError, OSError) as error:
            exc = error
        status = response.status_code if response is not None else None
        if response is not None and 200 <= response.status_code < 300 and check is not None:
            try:
                check(response)
            except Exception as error:
                exc = error
        verdict = classify(status, exc)
        if verdict == "ok":
            assert response is not None
            return response
        problem = _redact(_describe(status, exc, response), secrets)
        elapsed = clock() - started

        plural = "attempt" if attempt == 1 else "attempts"
        facts: dict[str, Any] = {
            "what": what,
            "attempts": attempt,
            "status": status,
            "problem": problem,
            "elapsed_s": elapsed,
        }
        if verdict == "fail":
            message = f"{what}: {problem} (not retryable; {attempt} {plural})"
            raise EndpointError(_redact(message, secrets), retryable=False, delays=list(delays), **facts) from exc
        if attempt >= backoff.max_attempts:
            message = (
                f"{what}: gave up after {attempt} {plural} in {elapsed:.1f}s (max_attempts={backoff.max_attempts}); "
                f"last problem: {problem}"
            )
            raise EndpointError(_redact(message, secrets), retryable=True, delays=list(delays), **facts) from exc
        delay = backoff.delay(attempt, rng)
        if response is not None:
            asked = backoff.retry_after_delay(response.headers.get("Retry-After"))
            if asked is not None:
                delay = asked
        if elapsed + delay > backoff.max_total_s:
            message = (
                f"{what}: gave up after {attempt} {plural} in {elapsed:.1f}s: waiting {delay:.2f}s more would "
                f"exceed max_total_s={backoff.max_total_s:g}s; last problem: {problem}"
            )
            raise EndpointError(_redact(message, secrets), retryable=True, delays=list(delays), **facts) from exc
        log.warning(
            "%s: attempt %d/%d failed (%s); retrying in %.2fs", what, attempt, backoff.max_attempts, problem, delay
        )
        if on_retry is not None:
            on_retry(attempt, delay, problem)
        delays.append(delay)
        sleep(delay)
