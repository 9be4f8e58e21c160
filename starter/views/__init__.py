"""What operators see of an agent, shared by the CLI and the web console:
readers of the store and plain-text renderings. Imports neither of them."""
