"""`GET/POST /approvals/{token}`: the signed, expiring, single-use approval link.

GET shows the evidence and Approve / Reject, or says plainly why the link cannot decide. POST counts the
choice with `runtime_ops.decisions.decide.decide`; the link's signature is the approver's authentication. A
rejection needs a reason (400, nothing recorded, the link still valid), as through the API and the CLI. Both
render `Announcer.view`, the same view the Slack message shows, so a page after a decision says what follows.
"""

from __future__ import annotations

from fastapi import APIRouter, BackgroundTasks, Form, Request
from fastapi.responses import HTMLResponse

from runtime_ops.api.deps import AnnouncerDep, ClockDep, LinkSecretDep, RefusalsDep, StoreDep
from runtime_ops.api.pages import decision_page, evidence_page, outcome_page
from runtime_ops.approvals import links
from runtime_ops.approvals.links import display_name
from runtime_ops.decisions.decide import decide
from runtime_ops.decisions.preview import link_state
from runtime_ops.storable_text import unstorable

router = APIRouter(tags=["approvals"])

_REFUSAL_STATUS = {"tampered": 403, "expired": 410}
MAX_REASON = 2000  # as the JSON API's decision body


@router.get("/approvals/{token}", response_class=HTMLResponse)
def approval_page(
    token: str, store: StoreDep, now: ClockDep, link_secret: LinkSecretDep, announcer: AnnouncerDep
) -> HTMLResponse:
    try:
        claims = links.read(link_secret, token, now())
    except links.LinkError as exc:
        return HTMLResponse(outcome_page("Link refused", str(exc), "refused"), _REFUSAL_STATUS[exc.kind])
    request = store.requests.get_request(claims.request_id)
    used = store.votes.link_use(claims.nonce) if request is not None else None
    state = link_state(request, link_digest=claims.digest, link_used=used is not None)
    if state == "unknown_request" or request is None:
        return HTMLResponse(outcome_page("Unknown request", f"No approval request {claims.request_id}."), 404)
    if state == "link_used" and used is not None:
        message = (
            f"This link was already used to {used['action']} at {used['used_at']:%Y-%m-%d %H:%M} UTC."
            " Each link decides once."
        )
        return HTMLResponse(decision_page("Link already used", message, announcer.view(request), "refused"), 409)
    if state == "candidate_changed":
        message = "This link was issued for a different candidate; the request it belongs to no longer applies."
        return HTMLResponse(outcome_page("Candidate changed", message, "refused"), 409)
    view = announcer.view(request)
    if state == "already_decided":
        by = f" by {_names(view.decided_by)}" if view.decided_by else ""
        message = f"{request['id']} is {request['status']}{by}."
        return HTMLResponse(decision_page("Already decided", message, view, "info"), 409)
    return HTMLResponse(evidence_page(view, claims.approver))


@router.post("/approvals/{token}", response_class=HTMLResponse)
def approval_decide(
    token: str,
    request: Request,
    background: BackgroundTasks,
    refusals: RefusalsDep,
    store: StoreDep,
    now: ClockDep,
    link_secret: LinkSecretDep,
    announcer: AnnouncerDep,
    action: str = Form(...),
    reason: str | None = Form(None),
) -> HTMLResponse:
    if action not in ("approve", "reject"):
        return HTMLResponse(outcome_page("Bad request", f"unknown action {action!r}", "refused"), 400)
    try:
        claims = links.read(link_secret, token, now())
    except links.LinkError as exc:
        detail = {"action": action, "message": str(exc)}
        client = request.client.host if request.client else None
        retry = refusals.refused(channel="link", outcome=f"{exc.kind}_link", client=client, detail=detail)
        if retry is not None:
            page = outcome_page("Too many refused links", f"Retry in {retry} s.", "refused")
            return HTMLResponse(page, 429, {"Retry-After": str(retry)})
        return HTMLResponse(outcome_page("Link refused", str(exc), "refused"), _REFUSAL_STATUS[exc.kind])
    reason = (reason or "").strip() or None
    problem = _reason_problem(action, reason)
    if problem:
        return HTMLResponse(outcome_page("Not recorded", problem, "refused"), 400)
    outcome = decide(
        store,
        claims.request_id,
        actor=claims.approver,
        vote="approve" if action == "approve" else "reject",
        channel="link",
        reason=reason,
        now=now(),
        link_nonce=claims.nonce,
        link_digest=claims.digest,
    )
    if outcome.counted and outcome.request is not None:
        background.add_task(announcer.after_decision, claims.request_id)
        title = "Approved" if action == "approve" else "Rejected"
        view = announcer.view(outcome.request)
        if outcome.decided:
            message = f"{view.request_id} {view.status} by {_names(view.decided_by)}"
        else:  # counted towards M of N
            message = (
                f"approval {len(view.approvals)} of {view.required_approvals} recorded for {view.request_id} "
                f"({display_name(claims.approver)})"
            )
        return HTMLResponse(decision_page(title, message, view))
    status = 409 if outcome.conflict else 403
    return HTMLResponse(outcome_page("Not recorded", outcome.message, "refused"), status)


def _reason_problem(action: str, reason: str | None) -> str | None:
    """Why the form's reason cannot be recorded (the page says it; nothing changes, the link still works)."""
    if action == "reject" and reason is None:  # as the API and the CLI: a rejection says why
        return "A rejection needs a reason: go back, write why in the Reason box and press Reject again."
    if reason is not None and len(reason) > MAX_REASON:
        return f"The reason is {len(reason)} characters long; keep it within {MAX_REASON} and send it again."
    problem = unstorable(reason or "")
    return f"The reason contains {problem}; remove it and send it again." if problem else None


def _names(approvers: list[str]) -> str:
    return ", ".join(display_name(a) for a in approvers)
