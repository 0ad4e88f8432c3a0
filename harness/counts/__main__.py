"""`python -m harness.counts`: the count mode's Hydra app (harness/counts/app.py)."""

from __future__ import annotations

import sys

from harness.counts.app import main

if __name__ == "__main__":
    sys.exit(main())
