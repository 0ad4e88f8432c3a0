"""`python -m harness.report.calibration --counts DIR [--out DIR]`: fit each paper's declared cost
model (conf/calibration.yaml) on its fit figures' counts, print the constants with their intervals
and every held-out figure's prediction error, and write the page and tables into --out.
`--commands` prints the count-mode commands that produce DIR and exits."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from harness.report.calibration import DeclarationError, calibrate_all, load
from harness.report.calibration import page as page_mod
from harness.report.calibration.declaration import DECLARATION_FILE, PAPERS
from harness.report.calibration.fit import BOOTSTRAP


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.report.calibration", description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", default=None, help="the folder the count commands wrote (<counts>/<paper>/<run>)")
    parser.add_argument("--out", default=None, help="where to write calibration.md and the tables")
    parser.add_argument("--declaration", default=str(DECLARATION_FILE), help="the declaration (conf/calibration.yaml)")
    parser.add_argument("--paper", action="append", default=None, help=f"only these papers ({', '.join(PAPERS)})")
    parser.add_argument("--bootstrap", type=int, default=BOOTSTRAP, help="bootstrap draws for the sampling intervals")
    parser.add_argument("--commands", action="store_true", help="print the count commands and exit")
    args = parser.parse_args(argv)
    try:
        models = load(Path(args.declaration))
    except DeclarationError as exc:
        print(f"declaration error: {exc}", file=sys.stderr)
        return 2
    for p in args.paper or []:
        if p not in models:
            parser.error(f"--paper={p!r} is invalid; allowed: {', '.join(models)}")
    if args.commands:
        for paper, m in models.items():
            for run in m.runs.values():
                if not args.paper or paper in args.paper:
                    print(page_mod.count_command(paper, run))
        return 0
    if not args.counts or not Path(args.counts).is_dir():
        parser.error(f"--counts={args.counts!r} is invalid; allowed: the folder the count commands wrote "
                     "(`--commands` prints them)")
    if args.bootstrap < 0:
        parser.error(f"--bootstrap={args.bootstrap!r} is invalid; allowed: an integer >= 0")
    counts = Path(args.counts)
    fits, sizes, missing = calibrate_all(counts, models, args.paper, bootstrap=args.bootstrap)
    for paper, m in models.items():
        if args.paper and paper not in args.paper:
            continue
        if m.status == "too_few_figures":
            print(f"{paper}: not calibrated, too few absolute figures ({m.reason.split('. ')[0]}.)")
        elif paper in missing:
            print(f"{paper}: not fitted, counts missing under --counts: {', '.join(missing[paper])}")
        if f"{paper} (held out, not judged)" in missing:
            print(f"{paper}: held-out figures not judged, counts missing: "
                  f"{', '.join(missing[f'{paper} (held out, not judged)'])}")
    for f in fits:
        print(f"{f.paper}: terms {', '.join(f.terms)}")
        for j, t in enumerate(f.terms):
            loo = (f", leave-one-out {f.loo[0, j] * 1e9:.4g}-{f.loo[1, j] * 1e9:.4g}" if f.loo is not None
                   else ", exactly determined")
            print(f"  c_{t} = {f.constants[j] * 1e9:.4g} ns (sampling 95% {f.sampling[0, j] * 1e9:.4g}-"
                  f"{f.sampling[1, j] * 1e9:.4g}{loo})")
        for r in f.figures:
            err = f"{r['rel_error']:+.1%}" if math.isfinite(r["rel_error"]) else "n/a"
            print(f"  {r['role']:7s} {r['figure']}: published {r['published']:,.4g} {r['unit']}, predicted "
                  f"{r['predicted']:,.4g} ({err})")
    if args.out:
        cmd = "python -m harness.report.calibration --counts <COUNTS> --out <OUT>" + "".join(
            f" --paper {p}" for p in args.paper or [])
        text = page_mod.render({p: m for p, m in models.items() if not args.paper or p in args.paper}, fits, sizes,
                               missing, cmd)
        for path in page_mod.write(Path(args.out), text, page_mod.constants_table(fits), page_mod.figures_table(fits),
                                   sizes):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
