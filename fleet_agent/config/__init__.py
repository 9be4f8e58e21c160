"""Where fleet-agent's process settings come from: the environment and the
optional `.env` file (`env_file`, `env_settings`), the worker's settings and
secrets (`settings`), how much work one worker takes on (`tuning`), where a
local stack listens and keeps its files (`local_stack`) and where metrics are
served (`metrics_address`). The agent's live config (`AgentConfig`) is a
workflow payload: fleet_agent/models/config.py.

Import from the submodules: this package imports nothing itself.
"""
