"""Deciding approval requests: one entry point for every channel.

Where is a Slack click counted? In `decide.decide`, the call a signed link and the CLI make too:

    Slack button  api/routes/slack.py ──────────────┐
    signed link   api/routes/approval_pages.py ─────┼──▶ decide(store, request_id, actor=, vote=, channel=, now=)
    CLI           cli/approvals.py ─────────────────┤      │
    JSON API      api/routes/approvals.py ──────────┘      │  (CLI and API: as their operator key's approver)
                                                           ├─ store.votes.cast_vote: one transaction (row lock,
                                                           │  policies.approvals.authorise, the vote, tally,
                                                           │  compare-and-set of the outcome, audit record)
                                                           └─ the `approval.decision` span, linked to the request

- `decide`: `decide` (count one attempt), `refuse` (audit an attempt refused before it named a request),
  `decide_by_policy` (a rule decides instead of a person: the online half of the gate, from
  `approvals/online_gate.py`, as `policy:online`), `DecisionOutcome` (what the caller renders).
- who may decide a request and when it is decided (`RequestPolicy`, `authorise`, `tally`) is pure policy:
  `runtime_ops.policies.approvals`, below the store that applies it inside the vote's transaction.
- `preview`: what a signed link would do if used now (the approval page's GET); pure.

The channels only authenticate and render: Slack's signature and click parsing are in `approvals/slack/`,
signed link tokens in `approvals/links.py`, and updating the Slack message afterwards in `approvals/announce.py`.
This package imports neither the state store nor Dagster (the store is passed in), so no package cycle runs
through it.
"""
