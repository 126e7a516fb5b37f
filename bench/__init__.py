"""runtime_ops benchmarks: `make bench` / `python -m bench`.

Each benchmark measures one of our paths and a baseline in the same run, on the same machine, and reports
the ratio; targets are reported (met / missed), never asserted, and the run exits 0 when a target is
missed. Results go to `bench/results/latest.json` and `bench/results/latest.md`.

Adding a benchmark: create a module in this package and decorate a no-argument function returning a list of
`bench.common.BenchResult` with `@bench.common.benchmark("name")`. `python -m bench` imports every module of
the package, so keep module import free of side effects (servers run from `--factory` functions).
"""
