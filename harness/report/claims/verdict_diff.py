"""`python -m harness.report.claims.verdict_diff --before docs/reproduction/report.md [--results DIR]
[--presets a,b] [--out FILE]`: claim by claim, the verdicts of a committed record beside the verdicts
the current claims give on a runs table, on both bases, with the figure behind the new one.

Why: a change to a strategy or a preset must show which published claims its new runs move and
why (the closing note of a fidelity change, docs/reproduction/ re-made). The earlier verdicts are
read from the record's own report.md (the claims tables harness/report/site/record.py writes), so
the comparison needs no runs table of the old record, only what the repository commits.

Only the claims whose preset has runs in the table are compared (a partial re-run compares what it
re-ran); a claim new since the record reads "(new)" before.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from harness.report import claims as claims_mod
from harness.report import results
from harness.report.claims import BASES, ClaimResult

ROW = re.compile(r"^\| \[?`?(?P<id>[a-z0-9][a-z0-9_.-]+)`?\]?")
VERDICT = re.compile(r"\*\*(?P<v>[^*]+)\*\*")


@dataclass
class Before:
    compute: str
    network: str
    derived: dict[str, str] = field(default_factory=dict)  # a derived basis's verdict, where the record has one


def _split_row(line: str) -> list[str]:
    """A Markdown table row's cells (a `\\|` inside a cell is text, not a border)."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def _header(cells: list[str]) -> dict[str, int] | None:
    """A claims table's header: the column of each basis (compute, network, then any derived basis
    between network and "ours"), or None for another table."""
    names = [c.strip().lower() for c in cells]
    if len(names) < 6 or names[0] != "claim" or "compute" not in names or "network" not in names:
        return None
    net = names.index("network")
    cols = {"compute": names.index("compute"), "network": net}
    for i in range(net + 1, len(names) - 1):  # the last column is ours (first cells)
        cols[names[i]] = i
    return cols


def read_record(report: Path) -> dict[str, Before]:
    """claim id -> its verdicts on each basis in a record's report.md (a basis-free claim gives the
    same verdict to both, as the record prints it; a derived basis's column where the table has one,
    harness/report/claims/bases.py)."""
    out: dict[str, Before] = {}
    cols = {"compute": 3, "network": 4}
    width = 6
    for line in Path(report).read_text().splitlines():
        if line.startswith("| claim |"):
            head = _header(_split_row(line))
            if head is not None:
                cols, width = head, len(_split_row(line))
            continue
        m = ROW.match(line)
        if not m:
            continue
        cells = _split_row(line)
        if len(cells) != width:  # the claims table: claim, source, published, compute, network, [derived...], ours
            continue
        verdicts = {b: VERDICT.search(cells[i]) for b, i in cols.items()}
        if not (verdicts["compute"] and verdicts["network"]):
            continue
        derived = {b: v.group("v") for b, v in verdicts.items() if b not in BASES and v}
        out[m.group("id")] = Before(verdicts["compute"].group("v"), verdicts["network"].group("v"), derived)
    if not out:
        raise ValueError(f"{report}: no claims table found (rows '| `claim-id`: ... | **verdict** | **verdict** |'); "
                         "expected a record's report.md written by `make record`")
    return out


def _kind(verdict: str) -> str:
    return verdict.split(" (")[0]


def _after(r: ClaimResult) -> tuple[str, str]:
    if "any" in r.verdicts:
        v = r.verdicts["any"].verdict
        return v, v
    return r.verdicts["compute"].verdict, r.verdicts["network"].verdict


def _evidence(r: ClaimResult) -> str:
    v = r.on("compute")
    text = "; ".join(v.comparisons[:2]) or "; ".join(v.missing[:1])
    return text[:400] + ("..." if len(text) > 400 else "")


def diff(before: dict[str, Before], table: pd.DataFrame, claims: list[dict] | None = None,
         presets: list[str] | None = None) -> pd.DataFrame:
    """One row per claim whose preset has runs in `table` (or is in `presets`): before and after on
    both bases, whether either basis changed kind, and the new figure."""
    claims = claims_mod.load_claims() if claims is None else claims
    ran = set(table["experiment"].dropna().unique()) if "experiment" in table else set()
    chosen = set(presets) if presets else ran
    table = claims_mod.with_derived(table)
    rows = []
    for c in claims:
        if c["preset"] not in chosen:
            continue
        r = claims_mod.evaluate_both(c, table)
        after = _after(r)
        old = before.get(c["id"])
        old_pair = (old.compute, old.network) if old else ("(new)", "(new)")
        moved = [b for b, o, n in zip(BASES, old_pair, after) if _kind(o) != _kind(n)]
        row = {"claim": c["id"], "paper": c.get("paper"), "preset": c["preset"],
               "before_compute": old_pair[0], "after_compute": after[0],
               "before_network": old_pair[1], "after_network": after[1]}
        for b in [*r.derived, *(b for b in (old.derived if old else {}) if b not in r.derived)]:
            was = (old.derived.get(b) if old else None) or ("(new)" if not old else "-")
            now = r.verdicts[b].verdict if b in r.verdicts else "-"
            row[f"before_{b}"], row[f"after_{b}"] = was, now
            if "-" not in (was, now) and was != "(new)" and _kind(was) != _kind(now):
                moved.append(b)
        rows.append({**row, "moved": ", ".join(moved), "evidence": _evidence(r)})
    frame = pd.DataFrame(rows)
    derived = [c for c in frame.columns if c.startswith(("before_", "after_")) and c.split("_", 1)[1] not in BASES]
    return frame.fillna({c: "-" for c in derived}) if derived else frame


def derived_in(frame: pd.DataFrame) -> list[str]:
    """The derived bases a diff frame has columns for."""
    return [c[len("after_"):] for c in frame.columns if c.startswith("after_") and c[len("after_"):] not in BASES]


def markdown(frame: pd.DataFrame) -> list[str]:
    """The changed claims first, then the unchanged, each as a table row."""
    if frame.empty:
        return ["No claim of the re-run presets."]
    derived = derived_in(frame)
    head = ["| claim | preset | compute: before -> after | network: before -> after | "
            + "".join(f"{b}: before -> after | " for b in derived) + "the new figure (compute, first cells) |",
            "|---|---|---|---|" + "---|" * len(derived) + "---|"]
    cell = lambda s: str(s).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = []
    for title, part in (("Verdicts that moved", frame[frame["moved"] != ""]),
                        ("Verdicts that stayed", frame[frame["moved"] == ""])):
        lines += [f"### {title} ({len(part)})", ""]
        if part.empty:
            lines += ["None.", ""]
            continue
        lines += head
        for _, r in part.sort_values(["paper", "claim"]).iterrows():
            lines.append("| " + " | ".join(cell(x) for x in (
                f"`{r['claim']}`", r["preset"], f"{r['before_compute']} -> **{r['after_compute']}**",
                f"{r['before_network']} -> **{r['after_network']}**",
                *(f"{r[f'before_{b}']} -> **{r[f'after_{b}']}**" for b in derived), r["evidence"])) + " |")
        lines.append("")
    counts = frame.assign(k=frame["after_compute"].map(_kind)).groupby("k").size()
    old = frame.assign(k=frame["before_compute"].map(_kind)).groupby("k").size()
    lines += ["Compute basis, these claims: " + ", ".join(f"{k} {old.get(k, 0)} -> {counts.get(k, 0)}"
                                                          for k in sorted(set(counts.index) | set(old.index))), ""]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.report.claims.verdict_diff", description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="a record's report.md (e.g. docs/reproduction/report.md)")
    parser.add_argument("--results", default=None, help="the results folder whose runs table is judged "
                                                          "(default: results/ or $STPS_RESULTS)")
    parser.add_argument("--presets", default=None, help="comma-separated presets to compare (default: every "
                                                          "preset with runs in the table)")
    parser.add_argument("--out", default=None, help="write the Markdown here (default: print it)")
    args = parser.parse_args(argv)
    before = read_record(Path(args.before))
    table = results.read_runs_table(results.results_root(args.results))
    frame = diff(before, table, presets=args.presets.split(",") if args.presets else None)
    moved = int((frame["moved"] != "").sum()) if len(frame) else 0
    results.write_or_print("\n".join(markdown(frame)) + "\n", args.out, f"{len(frame)} claims, {moved} moved")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
