"""The worker's settings and secrets (`settings`), how much work one worker
takes on (`tuning`) and where metrics are served (`metrics_address`), read
from the environment and the optional `.env` file with fleet_agent/env/.
`Settings` gathers the variables each domain package declares (demand,
market, the prover, the model table, the store, search attributes), so this
package sits above them all and none imports it. The agent's live config
(`AgentConfig`) is a workflow payload: fleet_agent/models/config.py.

Import from the submodules: this package imports nothing itself.
"""
