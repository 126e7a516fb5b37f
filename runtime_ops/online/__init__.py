"""Online evaluation on live traffic (pure: no Dagster, no I/O): team-draft interleaving and its credit, the
statistics that compare two arms, and the click models that simulate users in tests and benchmarks."""
