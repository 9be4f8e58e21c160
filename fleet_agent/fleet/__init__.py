"""The fleet as the agent sees it: labels, guardrails, snapshots, and settling
create labels that carry more than one machine. Temporal-free."""
