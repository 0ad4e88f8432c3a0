"""`python -m harness.report.claims ID [ID ...] [--results DIR]`: one claim's verdict on both bases,
every cell it compared with our figures, the cells it missed and the runs it left out, judged now
from a runs table (a results folder, or a record's committed evidence such as
docs/reproduction/<date>/tables).

Why: a diagnosis quotes a verdict and its figures; this is the command that prints them, so a
reader re-derives the quote from the committed tables instead of trusting a copy.
"""

from __future__ import annotations

import argparse
import sys

from harness.report import claims as claims_mod
from harness.report import results
from harness.report.claims import report as claims_report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.report.claims", description=__doc__.split("\n\n")[0])
    parser.add_argument("ids", nargs="+", metavar="ID", help="claim ids of conf/claims.yaml")
    parser.add_argument("--results", default=None, help="the results folder or a record's tables "
                                                          "(default: results/ or $STPS_RESULTS)")
    args = parser.parse_args(argv)
    claims = {c["id"]: c for c in claims_mod.load_claims()}
    unknown = [i for i in args.ids if i not in claims]
    if unknown:
        near = sorted(c for c in claims if any(part in c for part in unknown[0].split("-")[:2]))[:8]
        print(f"unknown claim id(s): {', '.join(unknown)}; allowed: an id of conf/claims.yaml"
              + (f" (e.g. {', '.join(near)})" if near else ""), file=sys.stderr)
        return 2
    table = claims_mod.with_derived(results.read_runs_table(results.results_root(args.results)))
    found = [claims_mod.evaluate_both(claims[i], table) for i in args.ids]
    print("\n".join(claims_report.claim_details(found)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
