"""The fleet against work with deadlines, beside a foresight oracle:
`python -m bench.demand_day.day` (bench/README.md)."""
