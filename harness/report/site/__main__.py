"""`python -m harness.report.site [--results DIR] [--out DIR] [--record DIR]`: the results site
(harness/report/site/__init__.py builds it)."""

import sys

from harness.report.site import main

sys.exit(main())
