"""A week on the simulator's Snark Market: the fleet's profit beside a foresight oracle."""
