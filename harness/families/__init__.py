"""Query families as plugins: the contract, the registry, the object store and rules snapshot queries share, and one folder per family."""
