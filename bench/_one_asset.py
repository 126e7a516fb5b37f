"""The smallest code location: one asset in one Definitions, the baseline of the `load` benchmark.

It imports what any Dagster code location imports (dagster itself) and nothing else, so the load benchmark's
ratio is what runtime_ops adds on top of Dagster's own start-up.
"""

import dagster as dg


@dg.asset
def one_asset() -> int:
    return 1


defs = dg.Definitions(assets=[one_asset])
