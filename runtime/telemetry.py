"""The worker's Prometheus endpoint: the Temporal SDK's runtime telemetry.

One `Runtime` with a `PrometheusConfig` serves `/metrics` on its address; the
SDK's own metrics (workflow task latencies, schedule-to-start, activity
metrics, pollers, slots) and ours (recorded through the SDK's metric meter in
workflows/metrics.py and activities/runlog.py) come out of it. Clients
connected with that runtime, and the workers built on them, record into it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

from fleet_agent.config.metrics_address import METRICS_ENV, METRICS_ENV_ALIAS, metrics_address

__all__ = [
    "STACK_METRICS_ADDRESS",
    "MetricsUnavailable",
    "install_metrics",
    "install_stack_metrics",
    "metrics_runtime",
]

# `fleet-agent up` serves metrics here unless METRICS_PORT says otherwise
# (9464: the port OpenTelemetry's Prometheus exporter uses by default).
STACK_METRICS_ADDRESS = "127.0.0.1:9464"

# Buckets that fit our histograms (the SDK's default stops at 10): P0 latency
# around the 2 s debounce, runs of seconds to minutes, a run's LLM cost.
_BUCKETS: dict[str, list[float]] = {
    "fleet_p0_latency_seconds": [0.5, 1, 2, 2.5, 3, 5, 10, 30, 60, 300],
    "fleet_run_duration_seconds": [1, 5, 10, 30, 60, 120, 300, 600, 1800],
    "fleet_run_llm_cost_usd": [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5],
}


class MetricsUnavailable(RuntimeError):
    """The endpoint could not be served (the address is taken, say)."""


def metrics_runtime(address: str) -> Runtime:
    """A runtime that serves Prometheus metrics on `address` (`HOST:PORT`).

    Durations are seconds and counters end in `_total`, as Prometheus expects.
    Raises `MetricsUnavailable` when the address cannot be bound.
    """
    try:
        return Runtime(
            telemetry=TelemetryConfig(
                metrics=PrometheusConfig(
                    bind_address=address,
                    counters_total_suffix=True,
                    durations_as_seconds=True,
                    histogram_bucket_overrides=_BUCKETS,
                )
            )
        )
    except Exception as exc:  # the core reports a bind failure as a plain error
        raise MetricsUnavailable(f"cannot serve metrics on {address}: {exc}") from None


def install_metrics(address: str) -> str:
    """Make a metrics runtime the process's default, before any client connects.

    Every client connected afterwards without a runtime of its own (the
    worker's, the CLI's) records into it. Returns the scrape URL. Raises
    `MetricsUnavailable` when the address cannot be bound, or when a default
    runtime is already in use (it must come first).
    """
    runtime = metrics_runtime(address)
    try:
        Runtime.set_default(runtime, error_if_already_set=True)
    except RuntimeError:
        raise MetricsUnavailable(
            "this process already uses a Temporal runtime, so metrics cannot be installed"
        ) from None
    return f"http://{address}/metrics"


def install_stack_metrics(
    env: Mapping[str, str], install: Callable[[str], str] = install_metrics
) -> tuple[str | None, str]:
    """Metrics for `fleet-agent up`: on METRICS_PORT when it is set (`off`
    turns them off), else on STACK_METRICS_ADDRESS.

    Returns (scrape URL or None, a line for the operator). A port set
    explicitly that cannot be served raises `MetricsUnavailable` (the line
    names the variable); the default port taken (a second stack, say) only
    turns metrics off, with a line that says so. `install` serves them
    (tests pass one that leaves the process's default runtime alone).
    """
    explicit = bool(env.get(METRICS_ENV, "").strip() or env.get(METRICS_ENV_ALIAS, "").strip())
    address = metrics_address(env) if explicit else STACK_METRICS_ADDRESS
    if address is None:
        return None, f"metrics:    off ({METRICS_ENV}=off)"
    try:
        url = install(address)
    except MetricsUnavailable as exc:
        if explicit:
            raise MetricsUnavailable(f"{exc}; set {METRICS_ENV} to a free port") from None
        return None, f"metrics:    off: {exc}; set {METRICS_ENV} to a free port"
    return url, f"metrics:    {url}"
