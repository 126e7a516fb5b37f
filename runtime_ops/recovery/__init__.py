"""Finishing interrupted runs without a person: runs on the default launcher whose worker died (`orphans`) or hung
(`stalls`) are failed, so that run retries relaunch them (`sensor`)."""
