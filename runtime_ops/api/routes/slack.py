"""`POST /slack/interactions`: an Approve/Reject button click, from Slack.

Authenticate (Slack's signature over the raw body), parse the click, count it with
`runtime_ops.decisions.decide.decide`, acknowledge at once (Slack wants an answer within 3 seconds), and
update the message everyone sees - or tell only the clicker why their click changed nothing - after the
response.
"""

from __future__ import annotations

from fastapi import APIRouter, BackgroundTasks, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from runtime_ops.api.deps import OpsDep
from runtime_ops.approvals.slack.interactions import MalformedInteraction, parse_interaction
from runtime_ops.decisions.decide import decide, refuse

router = APIRouter(tags=["slack"])


@router.post("/slack/interactions")
async def slack_interactions(request: Request, background: BackgroundTasks, ops: OpsDep) -> Response:
    # One dependency (the whole context) rather than four: this is the hot path Slack times out on.
    store, now, signature, announcer = ops.store, ops.now, ops.slack_signature, ops.announcer
    if signature is None:
        return JSONResponse({"error": "Slack interactivity is not configured: set SLACK_SIGNING_SECRET"}, 404)
    body = await request.body()  # the signature covers the raw bytes, so read them before any parsing
    problem = signature.problem(body, request.headers)
    if problem:
        client = request.client.host if request.client else None
        retry = await run_in_threadpool(
            ops.refusals.refused, channel="slack", outcome="forged", client=client, detail={"reason": problem}
        )
        if retry is not None:
            return JSONResponse({"error": "too many invalid Slack signatures"}, 429, {"Retry-After": str(retry)})
        return JSONResponse({"error": f"invalid Slack signature: {problem}"}, 401)
    try:
        click = parse_interaction(body, hooks_url=ops.settings.slack_hooks_url)
    except MalformedInteraction as exc:
        detail = {"reason": str(exc)}
        await run_in_threadpool(refuse, store.audit_log, channel="slack", outcome="malformed", detail=detail, now=now())
        return JSONResponse({"error": f"malformed interaction: {exc}"}, 400)
    # The state store is synchronous: the decision runs in the thread pool, off the event loop.
    outcome = await run_in_threadpool(
        decide,
        store,
        click.request_id,
        actor=click.user_id,
        vote=click.vote,
        channel="slack",
        now=now(),
        dedupe_key=click.dedupe_key,
    )
    notifier = announcer.notifier
    if notifier is not None and not outcome.redelivered:
        if outcome.counted:
            background.add_task(announcer.after_decision, click.request_id, click.response_url)
        else:
            background.add_task(notifier.respond_ephemeral, click.response_url, outcome.message)
    return Response(status_code=200)
