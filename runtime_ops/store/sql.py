"""TEMPORARY (removed with the call-site rewrite): the old home of utcnow."""

from runtime_ops.store.engine import utcnow

__all__ = ["utcnow"]
