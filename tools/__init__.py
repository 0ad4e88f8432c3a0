"""Maintenance commands for the repository's own documents (decision records, the module tree); they
import nothing from harness, strategies or datasets, so they sit outside the layers."""
