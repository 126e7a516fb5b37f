"""The approval page: the evidence side by side and Approve / Reject, or a clear refusal. Plain HTML."""

from __future__ import annotations

from html import escape
from urllib.parse import quote

from runtime_ops.approvals.links import display_name
from runtime_ops.approvals.slack.blocks import RequestView, title
from runtime_ops.policies.gate_text import CHANGED_HEADING, changed_parts, verdict_parts

_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:860px;margin:2rem auto;padding:0 1rem;
color:#1f2328;background:#fafbfc}
h1{font-size:1.5rem;margin-bottom:.25rem} .sub{color:#57606a;margin-top:0}
table{border-collapse:collapse;width:100%;margin:1rem 0;background:#fff}
th,td{border:1px solid #d0d7de;padding:.4rem .6rem;text-align:right} th:first-child,td:first-child{text-align:left}
th{background:#f6f8fa} .up{color:#1a7f37;font-weight:600} .down{color:#cf222e;font-weight:600}
.card{background:#fff;border:1px solid #d0d7de;border-radius:8px;padding:1rem 1.25rem;margin:1rem 0}
.verdict{font-size:1.05rem} code{background:#eff1f3;padding:.1rem .3rem;border-radius:4px}
form{display:flex;gap:.75rem;align-items:flex-end;flex-wrap:wrap} textarea{width:100%;min-height:3rem}
button{font-size:1rem;padding:.6rem 1.4rem;border-radius:6px;border:1px solid transparent;cursor:pointer}
.approve{background:#1f883d;color:#fff} .reject{background:#cf222e;color:#fff}
.outcome{font-size:1.2rem;padding:1rem 1.25rem;border-radius:8px}
.ok{background:#dafbe1;border:1px solid #1a7f37} .refused{background:#ffebe9;border:1px solid #cf222e}
.info{background:#ddf4ff;border:1px solid #0969da}
button,textarea{font:inherit} textarea{box-sizing:border-box;margin-top:.35rem;padding:.4rem .5rem;
border:1px solid #d0d7de;border-radius:6px} td{font-variant-numeric:tabular-nums}
.verdict{border-left:4px solid #0969da} .label{display:block;color:#57606a;font-size:.8rem;text-transform:uppercase;
letter-spacing:.04em;margin-bottom:.2rem}
"""


# Inline, so the icon needs no route of its own: every route but the health checks is authenticated, and a
# browser asks for /favicon.ico (a 404 in its console) whenever a page names no icon.
FAVICON = "data:image/svg+xml," + quote(
    "<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 16 16'><rect width='16' height='16' rx='3' fill='#1f883d'/>"
    "<path d='M4 8.5l2.5 2.5L12 5.5' stroke='#fff' stroke-width='2' fill='none'/></svg>"
)


def _page(title: str, body: str) -> str:
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{escape(title)}</title>"
        f"<meta name=viewport content='width=device-width,initial-scale=1'><link rel=icon href='{FAVICON}'>"
        f"<style>{_STYLE}</style></head><body>{body}</body></html>"
    )


def _evidence(view: RequestView) -> str:
    label = "<span class=label>Candidate minus production</span>"
    html = f"<div id=interval>{label}{escape(view.interval)}</div>" if view.interval else ""
    if view.changed:
        items = "".join(_changed_item(*changed_parts(item)) for item in view.changed[:5])
        html += f"<div id=changed><span class=label>{escape(CHANGED_HEADING)}</span><ul>{items}</ul></div>"
    return html


def _online(view: RequestView) -> str:
    """The online evidence beside the offline: the deciding signal first, each line with its query count."""
    if not view.online:
        return ""
    items = "".join(f"<li>{escape(line)}</li>" for line in view.online)
    return f"<div class=card id=online><span class=label>Online evidence (live traffic)</span><ul>{items}</ul></div>"


def _verdict(reason: str) -> str:
    words, rest = verdict_parts(reason)
    return f"<b id=outcome-words>{escape(words)}</b>" + (f": {escape(rest)}" if rest else "")


def _changed_item(direction: str, source: str, question: str, ranks: str) -> str:
    ranks_html = f" — <span class=ranks>{escape(ranks)}</span>" if ranks else ""
    source_html = f" <span class=source>({escape(source)})</span>" if source else ""
    return (
        f"<li class={escape(direction)}><b class={_DIRECTION_CLASS.get(direction, '')}>{escape(direction)}</b>"
        f"{source_html}: “{escape(question)}”{ranks_html}</li>"
    )


# Gains and losses are coloured as the metric deltas are.
_DIRECTION_CLASS = {"better": "up", "worse": "down"}


def _link(url: str | None, text: str, element_id: str) -> str:
    if not url:
        return ""
    # A new tab keeps the decision form; no opener, so the Dagster UI cannot reach back into this page.
    return f"<a id={element_id} href='{escape(url)}' target=_blank rel=noopener>{escape(text)}</a>"


def _dagster_links(view: RequestView) -> str:
    links = [
        _link(view.dagster_run_url, "the run that opened this request", "run-link"),
        _link(view.candidate_url, "the asset" if view.target is not None else "the candidate model", "candidate-link"),
        _link(view.report_url, "the evaluation report", "report-link"),
    ]
    shown = [a for a in links if a]
    return f"<p id=links class=sub>In Dagster: {' · '.join(shown)}</p>" if shown else ""


def evaluated_on(view: RequestView) -> str:
    """e.g. "set abc123def456, 45 questions"; "" for a report from before sets were versioned."""
    if not view.question_set:
        return ""
    count = f", {view.questions} questions" if view.questions is not None else ""
    return f"set {view.question_set}{count}"


def metrics_table(metrics: list[tuple[str, float, float | None]], labels: tuple[str, str]) -> str:
    rows = []
    for name, value, prod in metrics:
        if prod is None:
            delta = "—"
        else:
            d = float(value) - float(prod)
            cls = "up" if d > 0 else "down" if d < 0 else ""
            delta = f"<span class='{cls}'>{d:+.4f}</span>"
        rows.append(
            f"<tr><td>{escape(name)}</td><td>{float(value):.4f}</td>"
            f"<td>{'—' if prod is None else f'{float(prod):.4f}'}</td><td>{delta}</td></tr>"
        )
    return (
        f"<table id=metrics><thead><tr><th>metric</th><th>{escape(labels[0])}</th><th>{escape(labels[1])}</th>"
        f"<th>delta</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _metrics(view: RequestView) -> str:
    on = evaluated_on(view)
    cand_label = f"candidate v{view.candidate_version}" + (f" ({on})" if on else "")
    has_prod = any(prod is not None for _, _, prod in view.metrics)
    prod_label = f"production v{view.production_version}" if view.production_version is not None else "production"
    if not has_prod:
        prod_label = "production (none)"
    elif on:
        prod_label += f" (re-scored on {on})"
    note = ""
    if on and has_prod:
        # The production numbers are re-scored on the candidate's set, so they can differ from the ones in
        # production's own report: without this line that looks like an error on the page.
        note = (
            f"<p id=evaluated-on class=sub>Both columns were scored on evaluation {escape(on)}: production was "
            "re-scored on this set, so its numbers can differ from those in its own evaluation report.</p>"
        )
    return metrics_table(view.metrics, (cand_label, prod_label)) + note


def _asset_evidence(view: RequestView) -> str:
    """An asset gate's request: the materialization's evidence (its metadata) and the auto-approve rule's reason."""
    rows = "".join(f"<tr><td>{escape(name)}</td><td>{escape(value)}</td></tr>" for name, value in view.evidence)
    rule = f"<p id=verdict>{escape(view.verdict)}</p>" if view.verdict else ""
    return (
        f"<div class=card><span class=label>Evidence</span>{rule}<table id=evidence><thead><tr><th>field</th>"
        f"<th>value</th></tr></thead><tbody>{rows}</tbody></table></div>"
        f"<p class=sub>Digest <code>{escape(view.candidate_digest[:16])}…</code> (this materialization). This "
        "decision applies to exactly this materialization.</p>"
    )


def _rollback_evidence(view: RequestView) -> str:
    """An alert's rollback: the alert, the live evidence, the versions, and what approving and rejecting do."""
    assert view.rollback is not None
    rows = "".join(
        f"<tr id=rollback-{label.lower().replace(' ', '-')}><th>{escape(label)}</th><td>{escape(line)}</td></tr>"
        for label, line in view.rollback.lines()  # labels are ours, not input
    )
    return f"<div class='card verdict' id=rollback><span class=label>Rollback</span><table>{rows}</table></div>"


def _stages(view: RequestView) -> str:
    """The ramp after approval, stage by stage with its counts, interval and verdict."""
    if not view.stages:
        return ""
    items = "".join(f"<li>{escape(line)}</li>" for line in view.stages)
    return f"<div class=card id=ramp><span class=label>Ramp</span><ul>{items}</ul></div>"


def _request_evidence(view: RequestView) -> str:
    if view.target is not None:
        return _asset_evidence(view)
    if view.rollback is not None:
        return _rollback_evidence(view)
    return _promotion_evidence(view) + _stages(view)


def _promotion_evidence(view: RequestView) -> str:
    return f"""<div class="card verdict"><span class=label>Evaluation verdict</span>
<div id=verdict>{_verdict(view.verdict)}</div>
{_evidence(view)}</div>
{_online(view)}
{_metrics(view)}
<p class=sub>Candidate digest <code>{escape(view.candidate_digest[:16])}…</code> (model bytes + evaluation
report). This decision applies to exactly this candidate.</p>"""


def evidence_page(view: RequestView, approver: str) -> str:
    progress = ""
    if view.required_approvals > 1:
        names = ", ".join(display_name(a) for a in view.approvals)
        progress = (
            f"<p id=progress>{len(view.approvals)} of {view.required_approvals} approvals so far"
            f"{': ' + escape(names) if names else ''}.</p>"
        )
    expires = view.expires_at
    question = title(view)
    owner = "Gate" if view.target is not None else "Pipeline"
    body = f"""
<h1>{escape(question)}</h1>
<p class=sub>{owner} <b id=pipeline>{escape(view.pipeline or "demo")}</b> · approval request
<code>{escape(view.request_id)}</code> · you are <b id=approver>{escape(display_name(approver))}</b>
{f"· expires {expires:%Y-%m-%d %H:%M} UTC" if expires else ""}</p>
{_request_evidence(view)}
{_dagster_links(view)}
{progress}
<div class=card><form method=post>
<label style="flex-basis:100%">Reason (required to reject)<textarea name=reason maxlength=2000></textarea></label>
<button class=approve name=action value=approve id=approve>Approve</button>
<button class=reject name=action value=reject id=reject>Reject</button>
</form></div>"""
    return _page(f"Approve {view.request_id}", body)


def outcome_page(title: str, message: str, kind: str = "info") -> str:
    return _page(title, f"<h1>{escape(title)}</h1><div class='outcome {kind}' id=outcome>{escape(message)}</div>")


def decision_page(title: str, message: str, view: RequestView, kind: str = "ok") -> str:
    """The outcome of a decision, or of a link whose request was decided: what happens next, and where to watch."""
    body = f"<h1>{escape(title)}</h1><div class='outcome {kind}' id=outcome>{escape(message)}</div>"
    if view.next_step:
        watch = ""
        if view.status == "approved":
            watch = " " + _link(view.promotion_runs_url, "Watch the run in Dagster.", "promotion-link")
        body += (
            f"<div class=card id=next><span class=label>What happens next</span>{escape(view.next_step)}{watch}</div>"
        )
    if view.rollback is not None:
        body += _rollback_evidence(view)
    body += _stages(view) + _dagster_links(view)
    return _page(title, body)
