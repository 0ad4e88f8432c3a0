"""PS2Stream's partitioners (its baselines, kdt's hybrid partitioning with the gridt router) and its load adjustment."""
