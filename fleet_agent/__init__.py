"""fleet-agent's Temporal-free domain code: models, store, prompt, policy, vast.ai."""
