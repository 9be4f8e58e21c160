"""The code's shape, measured from its source (no server, no worker): how
far the agent workflow's helpers reach into one another's state."""
