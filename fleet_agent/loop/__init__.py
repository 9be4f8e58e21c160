"""The agent loop's pure rules, used inside the agent and run workflows:
what arrives at the agent becomes a model or a clear refusal (`inputs`),
pending triggers are coalesced and bounded (`triggers`), when the next run
is due (`schedule`: debounce windows, wakes, the heartbeat), and the rules
for scheduled wakes (`wakes`). Deterministic, no I/O.

Import from the submodules: this package imports nothing itself.
"""
