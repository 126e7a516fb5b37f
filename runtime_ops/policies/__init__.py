"""Pure decision rules, no I/O and no Dagster.

- `approvals`: who may decide an approval request and when it is decided;
- `gate`: how the gate judges a candidate against production, and the digests a decision is bound to.
"""
