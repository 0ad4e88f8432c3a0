"""Workload generators: one ordered event stream over a prepared dataset, one module per family
(range.py: PS2Stream's STS query sets and event mix), with the config schema and the drifts
shared by them."""
