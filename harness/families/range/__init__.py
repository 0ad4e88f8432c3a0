"""Range queries, continuous and snapshot (PS2Stream, Tornado, SSTD's CRQ and SRQ): GI2, merger, oracles."""
