"""Approvals in the state store: requests, votes (and the one-round-trip write batch of a decision), deadlines,
notification bookkeeping, and the hash-chained audit log (records, the pure chain, what it must account for)."""
