"""Durations as people write them in settings and defs.yaml: `90s`, `30m`, `4h`, `2d`, plain seconds, or `off`."""

from __future__ import annotations

from datetime import timedelta

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> timedelta | None:
    """`90s`, `30m`, `4h`, `2d`, plain seconds, or `off`/`none`/empty for no deadline."""
    value = text.strip().lower()
    if value in ("", "off", "none", "never", "0"):
        return None
    unit = value[-1]
    try:
        seconds = float(value[:-1]) * _UNITS[unit] if unit in _UNITS else float(value)
    except ValueError:
        raise ValueError(f"{text!r} is not a duration; use e.g. 90s, 30m, 4h, 2d or off") from None
    if seconds <= 0:
        raise ValueError("a duration must be positive (or 'off')")
    return timedelta(seconds=seconds)
