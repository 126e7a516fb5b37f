"""The state store's tables, by concern (re-exported by `runtime_ops.store.schema`)."""
