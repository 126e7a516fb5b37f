"""The project's "user error": a problem the person running runtime_ops can act on.

A setting, a pipeline declaration, a command's argument, or the state store's condition (unreachable, damaged):
the message names the problem and the fix in one line. Entry points show that line without a traceback (the CLI:
on stderr, exit status `exit_code`); any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """A problem the user can fix; its message is the whole report (one line)."""

    # The CLI's exit status for it: 2 a mistake in a setting, declaration or argument (or no instance to work on);
    # 3 a state store that is damaged or cannot be read; 4 one that cannot be reached (an outage: retry once back).
    exit_code = 2
