"""TEMPORARY (removed with the call-site rewrite): the old home of remove_alias_compensation."""

from runtime_ops.store.registry import remove_alias_compensation

__all__ = ["remove_alias_compensation"]
