"""What the tests and the benchmarks share: the fake Messages API, the
vast.ai stub and TCP proxy (`fakes/`), Temporal servers from the installed
binaries (`servers.py`), renting on the simulator (`sim_helpers.py`) and a
worker with agents on it (`agents.py`). Neither tests/ nor bench/ is
imported from here, so bench never imports tests (tests/layers/test_layers.py)."""
