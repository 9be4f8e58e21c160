"""The benchmarks, by what they measure: `bench/market_day/` (the fleet on a
simulated market day against the oracle), `bench/perf/` (speed, memory, CPU
and recovery under faults) and `bench/llm_cost/` (tokens and dollars of the
LLM path). `bench/_common.py` holds what they share; results go to
`bench/results/`.

Each module without a leading underscore is a script, run from the
repository root as `python -m bench.<folder>.<script>` (see bench/README.md).
"""
