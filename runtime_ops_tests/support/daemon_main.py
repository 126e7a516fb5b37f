"""`dagster-daemon` as the test deployments run it (support/topology.py): Dagster's own daemon, with the sensor and
asset daemons looping every second.

Dagster 1.13 hard-codes a 5 s floor on both loops (`dagster._daemon.sensor.MIN_INTERVAL_LOOP_TIME`,
`dagster._daemon.asset_daemon.MIN_INTERVAL_LOOP_SECONDS`) whatever a sensor's `minimum_interval_seconds` says, so
every sensor hop of a flow (landing -> ingest -> approvals -> promotion) waited up to 5 s for the next loop.
Measured on an idle deployment (code server + daemon): 0.23 cores at 5 s, 0.25 at 1 s.
Run as `python daemon_main.py run -w workspace.yaml`, the arguments of `dagster-daemon`.
"""

import sys

from dagster._daemon import asset_daemon, sensor
from dagster._daemon.cli import main

LOOP_S = 1

if __name__ == "__main__":
    sensor.MIN_INTERVAL_LOOP_TIME = LOOP_S  # pyright: ignore[reportConstantRedefinition]
    asset_daemon.MIN_INTERVAL_LOOP_SECONDS = LOOP_S  # pyright: ignore[reportConstantRedefinition]
    sys.argv[0] = "dagster-daemon"
    sys.exit(main())
