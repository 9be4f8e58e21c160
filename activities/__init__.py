"""Temporal activities: all of fleet-agent's I/O (store, LLM, vast.ai)."""
