"""What every process that talks to Temporal needs, the worker's and the CLI's alike.

- `connect`: the client connection (env config, TEMPORAL_PORT, one-line failures);
- `telemetry`: the process's Temporal runtime with Prometheus metrics;
- `stopping`: the stop event that SIGTERM and Ctrl-C set;
- `llm_provider`: the LLM provider the settings pick (the model's API or the
  offline autopilot).

It sits below both: the worker (worker.py) and the CLI (starter/) import it,
and it imports neither, nor activities/ or workflows/ (tests/layers/test_layers.py).
"""
