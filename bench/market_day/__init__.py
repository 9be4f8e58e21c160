"""The market day: 24 simulated hours of the fleet on the realistic market,
judged against the exact cheapest fleet (`day`), and the tables and
comparisons read from the days' JSON (`table`, `compare`)."""
