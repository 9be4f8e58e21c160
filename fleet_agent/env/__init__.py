"""Reading the process environment, below every package that has settings:
the optional `.env` file (`env_file`), the base of every settings model and
its one-line errors (`env_settings`: `EnvModel`, `SettingsError`), and where
a local stack listens and keeps its files (`local_stack`).

The domain packages each declare their own variables on `EnvModel`
(fleet_agent/demand/settings.py, fleet_agent/market/settings.py,
fleet_agent/notify/settings.py) and the store finds its default file with
`local_stack`; fleet_agent/config/ gathers them into the worker's settings.
So this package imports no other of fleet_agent's (tests/layers/test_layers.py).

Import from the submodules: this package imports nothing itself.
"""
