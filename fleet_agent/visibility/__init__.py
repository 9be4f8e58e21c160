"""What an operator sees of an agent in Temporal's Web UI and our CLI: the
workflow's one-line and one-screen details, and the custom search attributes."""
