"""The prover image's own code: the entrypoint and the TLS front (standard library only)."""
