"""End-to-end tests: whole processes (`runtime-ops dev`, `serve` and CLI runs, the Dagster deployment as local
processes, the code location loaded by `dagster`), browsers."""
