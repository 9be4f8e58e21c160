"""The offline policy (`autopilot`): a provider that answers as the model would, from rules.

It holds the fleet plan (policy), the band it keeps, the bridges and faster
covers while machines load, gap checks, swaps and trades. The rules that tools
enforce stay in `fleet_agent/fleet/`, which never imports this package.
"""
