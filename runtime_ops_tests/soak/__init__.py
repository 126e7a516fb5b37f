"""A seeded chaos soak: the topology as local processes under a mixed workload and injected faults, and the
checker that proves nothing was lost (runtime_ops_tests/soak/harness.py)."""
