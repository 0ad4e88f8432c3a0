"""Partitioning strategies: the contract, the registry, sample loads, the router shapes they share, and one package per paper."""
