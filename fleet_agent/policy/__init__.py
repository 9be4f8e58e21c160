"""The operating policy's numbers: what the model is told (the system prompt,
fleet_agent/llm/prompt.py) and what the offline stand-in does
(fleet_agent/autopilot/), from one source so the two cannot drift apart.

- `band`: how close to the ±5 % band's edges a plan goes;
- `premiums`: how much more a plan may pay than the cheapest, and how much a
  trade must save;
- `bridges`: when a large gap is bridged with fast temporary machines, and
  how;
- `checks`: the checks a search that found nothing schedules, and their
  reasons.

The band itself (`BAND`) and the spare's cap are the fleet's rules
(fleet_agent/fleet/spare.py). A number the autopilot alone uses (how it
searches, what it keeps in reserve) stays in fleet_agent/autopilot/. Plain
constants: this package imports nothing (tests/layers/test_layers.py).

Import from the submodules: this package imports nothing itself.
"""
