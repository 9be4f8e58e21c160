"""Operator entry points: the `fleet-agent` CLI, client helpers, the local stack."""
