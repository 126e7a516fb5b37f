"""Observability of runtime_ops: metrics (`metrics`, `collector`), and the logs and traces modules beside them."""
