"""The approval page: the evidence side by side and Approve / Reject, or a clear refusal. Plain HTML."""

from __future__ import annotations

from html import escape
from typing import Any

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


def _page(title: str, body: str) -> str:
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{escape(title)}</title>"
        f"<meta name=viewport content='width=device-width,initial-scale=1'><style>{_STYLE}</style></head>"
        f"<body>{body}</body></html>"
    )


def _evidence(verdict: dict) -> str:
    from runtime_ops.policies.gate_text import changed_lines, interval_text

    interval = interval_text(verdict.get("interval"))
    label = "<span class=label>Candidate minus production</span>"
    html = f"<div id=interval>{label}{escape(interval)}</div>" if interval else ""
    lines = changed_lines(verdict.get("changed_questions"))
    if lines:
        items = "".join(f"<li>{escape(line)}</li>" for line in lines)
        html += f"<div id=changed><span class=label>Questions whose results changed most</span><ul>{items}</ul></div>"
    return html


def metrics_table(candidate: dict[str, float], production: dict[str, float] | None, labels: tuple[str, str]) -> str:
    rows = []
    for name, value in candidate.items():
        if name == "questions":
            continue
        prod = (production or {}).get(name)
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


def evidence_page(request: dict[str, Any], report: dict[str, Any], approver: str, votes: list[dict[str, Any]]) -> str:
    cand_label = f"candidate v{request['candidate_version']}"
    prod_v = report.get("production_version")
    if prod_v:
        prod_label = f"production v{prod_v}"
    else:
        prod_label = "production" if report.get("production_metrics") else "production (none)"
    approvals = [v["actor"] for v in votes if v["vote"] == "approve"]
    progress = ""
    if int(request.get("required_approvals") or 1) > 1:
        progress = (
            f"<p id=progress>{len(approvals)} of {request['required_approvals']} approvals so far"
            f"{': ' + escape(', '.join(approvals)) if approvals else ''}.</p>"
        )
    expires = request.get("expire_at")
    body = f"""
<h1>Promote model v{request["candidate_version"]} to production?</h1>
<p class=sub>Pipeline <b id=pipeline>{escape(str(request.get("pipeline") or "demo"))}</b> · approval request
<code>{escape(request["id"])}</code> · you are <b>{escape(approver)}</b>
{f"· expires {expires:%Y-%m-%d %H:%M} UTC" if expires else ""}</p>
<div class="card verdict"><span class=label>Evaluation verdict</span>
<div id=verdict>{escape((report.get("verdict") or {}).get("reason", ""))}</div>
{_evidence(report.get("verdict") or {})}</div>
{metrics_table(report.get("candidate_metrics") or {}, report.get("production_metrics"), (cand_label, prod_label))}
<p class=sub>Candidate digest <code>{escape(request["candidate_digest"][:16])}…</code> (model bytes + evaluation
report). This decision applies to exactly this candidate.</p>
{progress}
<div class=card><form method=post>
<label style="flex-basis:100%">Reason (optional)<textarea name=reason></textarea></label>
<button class=approve name=action value=approve id=approve>Approve</button>
<button class=reject name=action value=reject id=reject>Reject</button>
</form></div>"""
    return _page(f"Approve {request['id']}", body)


def outcome_page(title: str, message: str, kind: str = "info") -> str:
    return _page(title, f"<h1>{escape(title)}</h1><div class='outcome {kind}' id=outcome>{escape(message)}</div>")
