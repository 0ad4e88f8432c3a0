"""The bottom layer: events (schema, keys, digests), grid, search and cell kernels, allocation, parameters, timing, and what a reported figure is."""
