"""The fleet as the agent sees it: labels, guardrails, snapshots. Temporal-free."""
