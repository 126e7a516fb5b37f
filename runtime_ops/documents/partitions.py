from __future__ import annotations

import dagster as dg

# One partition per landing batch (a sensor tick that found new objects), never one per file: Dagster's
# UI and daemon slow down past tens of thousands of partitions, and a bucket holds millions of files.
landing_batches = dg.DynamicPartitionsDefinition(name="landing_batches")
