"""Finishing interrupted runs without a person: orphaned runs on the default launcher are found and failed, so
that run retries relaunch them (see `orphans`)."""
