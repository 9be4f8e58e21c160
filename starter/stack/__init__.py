"""The local stack (`fleet-agent up`, `make run`): the Temporal dev server, the
vast.ai simulator, the router, the worker and the agent in one process tree
(up.py)."""
