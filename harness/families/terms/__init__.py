"""Top-k frequent terms (SSTD's STQ and CTQ): index, merger, oracle, snapshot answers."""
