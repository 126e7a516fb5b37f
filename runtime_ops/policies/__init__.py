"""Pure decision rules, no I/O and no Dagster.

- `approvals`: who may decide an approval request and when it is decided;
- `gate_policy`: the gate's policy (`GatePolicy`, no numpy), the one type the YAML, the settings and the rule use;
- `gate_rule`: how the gate judges a candidate against production (`judge`), on the interval of `bootstrap`;
- `digests`: the digests a decision is bound to; `changed_questions` and `gate_text`: the evidence shown to a person
  (the verdict in words, the interval, the questions whose results changed most).
"""
