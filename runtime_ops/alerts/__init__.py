"""Alerts: Alertmanager webhooks land in an inbox (the ops API); rules turn firing alerts into remediation runs.

`webhook` (the v4 payload) and `rules` (the rule file) are pure; `rollback` and `reembed` are the remediations
over the state store and the lock; `jobs` and `sensors` are their Dagster side.
"""
