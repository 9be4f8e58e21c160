"""The local stack (`fleet-agent up`, `make run`): the Temporal dev server, the
vast.ai simulator, the router, the worker and the agent in one process tree.

launch.py is the command's entry (light: it checks the ports first); up.py
runs the stack."""
