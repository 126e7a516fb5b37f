"""Running the system, in the state store: the alert inbox, the idempotency ledger, persisted sagas, retraining
signals and requests, ops API keys, and durable metric series."""
