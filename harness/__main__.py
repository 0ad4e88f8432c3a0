"""`python -m harness`: the Hydra app (one experiment, or a sweep with -m)."""

from __future__ import annotations

import sys

from harness.run.app import main

if __name__ == "__main__":
    sys.exit(main())
