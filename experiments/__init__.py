"""Experiments over runs: a run as one typed spec, its records, studies (validated,
seeded, floored comparisons) and their tables."""
