"""Notifications: which events tell a human, what they say, and where they go.

Pure rules (no Temporal): `rules` admits an event (the config's
`notify_events`, the quiet window) and names its idempotency key; `render`
turns it into a title, a body and a link; `settings` reads `FLEET_NOTIFY_URLS`
(a secret: the worker's environment only) and redacts a URL to its scheme and
host; `deliver` sends through apprise, one destination at a time. The agent
workflow emits the events (workflows/agent_notify.py), the activity
`send_notification` delivers them (activities/notify.py).
"""
