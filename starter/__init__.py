"""Operator entry points: the `fleet-agent` command (cli/), the web console
(console/) and the local stack (stack/), over what they share: the agent
client, the operator's requests and the views of the store (views/)."""
