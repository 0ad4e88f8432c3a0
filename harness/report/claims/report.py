"""The claims as a reader sees them: per preset, `results/plots/<preset>/report.md` (its runs'
throughput on both bases, then each claim that reads the preset with the paper's figure and ours,
a verdict per basis, the runs read and the runs left out), and `results/report.md`, the overview
of every claim with the per-paper tallies on both bases.

`python -m harness.report` rebuilds them all from the runs table without running anything.
"""

from __future__ import annotations

import platform
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import yaml

from harness.core import machine_load
from harness.report import claims as claims_mod
from harness.report import metrics, results, sizes
from harness.report.claims import BASES, VERDICTS, ClaimResult

PAPERS = ("ps2stream", "sstd", "tornado", "dkmsks", "dskype")
PAPER_TITLES = {"ps2stream": "PS2Stream (ICDE 2017)", "sstd": "SSTD (PVLDB 2020)", "tornado": "Tornado (ICDE 2016)",
                "dkmsks": "DkM-SKS (arXiv 2101.12417)", "dskype": "Skype / DSkype"}
BASIS_NOTE = ("Throughput and latency claims are judged twice: **compute-only** (the busiest worker's or "
              "dispatcher's CPU time, as measured) and **network** (the same runs under the preset's network "
              "profile, `conf/network/`: links, framing and per-block CPU modelled after the run). A network "
              "figure whose interval has zero width is a model output, not a measurement. Comparisons use "
              "the runs' repetition intervals: overlapping intervals are *inconclusive*. Mean latency is "
              "compared at one input rate common to the strategies compared, 0.7x the slowest one's "
              "throughput on that basis. The papers measured other systems on other hardware and sizes: a "
              "claim that does not hold here is a finding about these workloads and this implementation. A claim "
              "is *not exercised* where its runs did not put it to the test: two points that tie, or a "
              "precondition it declares (`requires`: a move with epochs after it, latencies above the "
              "model's floor, replication read after the pruning, selections timed on the same cells) failed, "
              "with the reason in the cell's note; it is counted apart, never as *does not hold*.")


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def claims_table(claim_results: list[ClaimResult], link: str | None = None) -> list[str]:
    """One row per claim: the paper's figure and setting, ours, a verdict on each basis (a derived
    basis's column, harness/report/claims/bases.py, only when some claim of the table was judged on it)."""
    derived = claims_mod.derived_bases(claim_results)
    lines = ["| claim | source | published (paper's setting) | compute | network | "
             + "".join(f"{b} | " for b in derived) + "ours (first cells) |",
             "|---|---|---|---|---|" + "---|" * len(derived) + "---|"]
    for r in claim_results:
        c = r.claim
        name = f"[{c['id']}]({link.format(preset=c['preset'], id=c['id'])})" if link else f"`{c['id']}`"
        if c.get("scope") == "extension":
            name += " *(harness extension)*"
        if claims_mod.is_retired(c):
            name += " *(retired)*"
        published = c.get("published", "") + (f" ({c['setting']})" if c.get("setting") else "")
        if "any" in r.verdicts:
            compute = network = f"**{r.verdicts['any'].verdict}** (no basis)"
        else:
            compute, network = (f"**{r.verdicts[b].verdict}**" for b in BASES)
            if r.flips:
                network += " (flips)"
        extra = [(f"**{r.verdicts[b].verdict}**" + (" (finding)" if b in r.findings else "")) if b in r.verdicts
                 else "-" for b in derived]
        ours = "<br>".join(r.on("compute").comparisons[:3]) or "; ".join(r.on("compute").missing[:2])
        lines.append("| " + " | ".join(_cell(x) for x in (f"{name}: {c['claim']}", c.get("source", ""), published,
                                                            compute, network, *extra, ours)) + " |")
    return lines


def claim_details(claim_results: list[ClaimResult]) -> list[str]:
    """Per claim: every cell compared on each basis, the cells missing and the runs left out."""
    lines = []
    for r in claim_results:
        c = r.claim
        lines += [f"### {c['id']}", "", f"{c['claim']} ({c.get('source', '')}; preset `{c['preset']}`, "
                                         f"metric `{c['check']['metric']}`, kind `{c['check']['kind']}`)", ""]
        if c.get("published"):
            lines.append(f"- published: {c['published']}" + (f" ({c['setting']})" if c.get("setting") else ""))
        for basis, v in r.verdicts.items():
            lines.append(f"- {'verdict' if basis == 'any' else basis}: **{v.verdict}**")
            lines += [f"  - {n}" for n in v.comparisons]
            lines += [f"  - missing: {m}" for m in v.missing]
        excluded = next(iter(r.verdicts.values())).excluded
        lines += [f"- left out: {e}" for e in excluded]
        runs = next(iter(r.verdicts.values())).runs
        if runs:
            lines.append(f"- runs read: {len(runs)}")
        lines.append("")
    return lines


def not_exercised(claim_results: list[ClaimResult]) -> list[str]:
    """The claims not exercised on some basis, each with its first cell's reason: what the tally's
    "not exercised" column counts, listed apart from the claims that do not hold (issue 48)."""
    lines = []
    for r in claims_mod.counted(claim_results):
        bases = [b for b, v in r.verdicts.items() if v.kind == claims_mod.NOT_EXERCISED]
        if bases:
            note = next((n for b in bases for n in r.verdicts[b].comparisons if "not exercised" in n), "")
            lines.append(f"- `{r.claim['id']}` ({', '.join(b if b != 'any' else 'no basis' for b in bases)}): {note}")
    return (["Not exercised (never counted as *does not hold*):", ""] + lines) if lines else []


def tally_table(claim_results: list[ClaimResult]) -> list[str]:
    """Per paper and basis: holds / partly / does not hold / inconclusive / not exercised / not measured (the
    papers' claims; harness extensions counted apart)."""
    lines = ["| paper | basis | " + " | ".join(VERDICTS) + " | claims |", "|---|---|" + "---:|" * (len(VERDICTS) + 1)]
    claim_results = claims_mod.counted(claim_results)  # retired claims are listed, never tallied
    groups = [(PAPER_TITLES.get(p, p), [r for r in claim_results if r.claim.get("paper") == p
                                         and r.claim.get("scope", "paper") == "paper"]) for p in PAPERS]
    groups.append(("harness extensions", [r for r in claim_results if r.claim.get("scope") == "extension"]))
    for title, group in groups:
        if not group:
            continue
        for basis in BASES:
            counts = claims_mod.tally(group, basis)
            lines.append(f"| {title} | {basis} | " + " | ".join(str(counts[k]) for k in VERDICTS)
                         + f" | {len(group)} |")
        for basis in claims_mod.derived_bases(group):  # only the claims judged on it
            counts = claims_mod.tally(group, basis)
            judged = sum(basis in r.verdicts for r in claims_mod.counted(group))
            lines.append(f"| {title} | {basis} | " + " | ".join(str(counts[k]) for k in VERDICTS) + f" | {judged} |")
    return lines


def derived_note(claim_results: list[ClaimResult]) -> list[str]:
    """What each derived basis some claim was judged on is, and the claims that hold on it and do not
    hold on compute, with the finding that makes them (harness/report/claims/bases.py); nothing when
    no claim was judged on one."""
    shown = claims_mod.derived_bases(claim_results)
    if not shown:
        return []
    lines = []
    for b in shown:
        basis = claims_mod.bases.REGISTRY[b]
        judged = sum(b in r.verdicts for r in claims_mod.counted(claim_results))
        lines.append(f"The **{b}** basis ({judged} claims judged on it): {basis.title}. A throughput claim is "
                     f"judged on it only where its runs have its figure.")
    lines.append("")
    found = claims_mod.findings(claim_results)
    for b in shown:
        mine = [r for r, fb in found if fb == b]
        lines.append(f"Claims that hold on the {b} basis and do not hold on compute ({len(mine)}; "
                     f"{claims_mod.bases.REGISTRY[b].finding}): "
                     + (", ".join(f"`{r.claim['id']}`" for r in mine) or "none") + ".")
    return lines + [""]


def preset_runs(preset: str, table: pd.DataFrame, version: str | None) -> pd.DataFrame:
    """The preset's successful runs of `version` (the newest per strategy and cell), those the
    claims may not read included: a report shows them, flagged (`throughput_tables`)."""
    if "experiment" not in table:
        return table.iloc[0:0]
    rows = results.labelled(table[(table["experiment"] == preset) & (table["status"] == "ok")])
    if version is not None and "code_version" in rows:
        rows = rows[rows["code_version"] == version]
    if "aa_role" in rows:  # the A/A repeat is read for its spread alone (harness/report/claims/aa_pairs.py)
        rows = rows[rows["aa_role"].astype(object) != "a2"]
    keys = [k for k in ("variant", *claims_mod.CELL) if k in rows]
    return rows.sort_values("started_at").groupby(keys, dropna=False, sort=False).tail(1)


def _flags(row: pd.Series) -> str:
    """Why the claims do not read a run shown in a report ("" when they do)."""
    flags = []
    if claims_mod.disagreed_with_oracle(row.get("oracle_ok")):
        flags.append("oracle mismatch")
    if pd.to_numeric(row.get("too_short"), errors="coerce") > 0:
        flags.append("too short")
    if why := machine_load.reasons(row.to_dict(), machine_load.Thresholds()):  # judged as the claims judge it
        flags.append(f"loaded machine ({'; '.join(why)})")
    return ", ".join(flags)


def throughput_tables(runs: pd.DataFrame) -> list[str]:
    """Per scenario: each strategy's compute-only and network throughput (median [interval]) and
    its bottleneck, per worker count (and x, facet), with what keeps a run from the claims."""
    lines = []
    runs = results.labelled(runs)
    for (wl, ds), g in runs.groupby(["workload", "dataset"], sort=True):
        lines += [f"### {wl} / {ds}", "", "| strategy | workers | x | compute-only | network | bottleneck | not read |",
                  "|---|---:|---|---:|---:|---|---|"]
        for _, r in g.sort_values(["variant", "workers"]).iterrows():
            x = " ".join(str(v) for v in (r.get("x"), r.get("facet")) if v is not None and not pd.isna(v)) or "-"
            lines.append(f"| {r['variant']} | {r['workers']} | {x} | {_with_interval(r, 'throughput_compute_eps')} | "
                         f"{_with_interval(r, 'throughput_network_eps')} | {r.get('bottleneck_resource') or '-'} | "
                         f"{_flags(r) or '-'} |")
        lines.append("")
    return lines


def _with_interval(row: pd.Series, col: str) -> str:
    mid, lo, hi = row.get(col), row.get(f"{col}_ci_lo"), row.get(f"{col}_ci_hi")
    text = metrics.show("throughput_eps", mid)
    if pd.notna(lo) and pd.notna(hi):
        text += " (model)" if lo == hi else f" [{metrics.show('throughput_eps', lo)}-{metrics.show('throughput_eps', hi)}]"
    return text


def _provenance(table: pd.DataFrame) -> str:
    versions = sorted(map(str, table["code_version"].dropna().unique())) if "code_version" in table else []
    return (f"Generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC} on {platform.node()} ({platform.machine()}, "
            f"Python {platform.python_version()}) from the runs table by `python -m harness.report`; "
            f"code versions read: {', '.join(versions) or 'not recorded'}.")


def write_preset_report(root: Path, preset: str, title: str, table: pd.DataFrame,
                        plot_paths: list[Path] = (), extra: list[str] = ()) -> Path:
    """results/plots/<preset>/report.md from the whole runs table (the claims pick their own runs);
    `extra`: more Markdown sections after the throughput tables (the sweep's medians)."""
    out_dir = root / "plots" / preset
    out_dir.mkdir(parents=True, exist_ok=True)
    claim_results = claims_mod.evaluate_all(table, preset=preset)
    own, _, version = claims_mod.evidence(preset, table) if "experiment" in table else (table.iloc[0:0], [], None)
    shown = preset_runs(preset, table, version)
    lines = [f"# {title or preset}", "", _provenance(shown), "",
             f"{len(own)} usable runs of this preset at code version {version or 'not recorded'} "
             f"(the newest run per strategy and cell), of {len(shown)} shown below; the claims read only "
             f"the usable ones.", "", BASIS_NOTE, ""]
    if len(shown):
        lines += ["## Throughput per strategy, both bases", ""] + throughput_tables(shown) + list(extra)
    lines += ["## Claims that read this preset", ""]
    if claim_results:
        lines += tally_table(claim_results) + [""] + derived_note(claim_results) + claims_table(claim_results) + [
            "", "## Each claim's cells", ""] + claim_details(claim_results)
    else:
        lines += ["No claim of conf/claims.yaml reads this preset.", ""]
    if sizes.is_sweep(preset):  # a size sweep: its size claims at every step, trends, time and memory
        lines += sizes.report_extra(root, preset, table)
        plot_paths = [p for p in plot_paths if p.name != "size_trends.png"]
    pngs = [p for p in plot_paths if p.suffix == ".png"]
    if pngs:
        lines += ["## Figures", ""] + [f"![{p.stem}]({p.name})" for p in pngs]
    path = out_dir / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def write_overview(root: Path, table: pd.DataFrame) -> Path:
    """results/report.md: the per-paper tallies on both bases and every claim's verdicts, each
    linked to its preset's report."""
    claim_results = claims_mod.evaluate_all(table)
    flips = [r for r in claim_results if r.flips]
    lines = ["# Published claims against this harness", "", _provenance(table), "", BASIS_NOTE, "",
             "## Verdicts per paper", ""] + tally_table(claim_results) + [""] + not_exercised(claim_results) + [
        "", f"{len(flips)} claims change verdict between the bases: "
            + (", ".join(f"`{r.claim['id']}`" for r in flips) or "none") + ".", ""] + derived_note(claim_results)
    for paper in PAPERS:
        group = [r for r in claim_results if r.claim.get("paper") == paper]
        if group:
            lines += [f"## {PAPER_TITLES[paper]}", ""] + claims_table(group, "plots/{preset}/report.md#{id}") + [""]
    lines += sizes.overview(root, table)
    path = root / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def preset_title(preset: str) -> str:
    """A preset's `experiment.title` from its YAML (the preset's name when it has none)."""
    path = claims_mod.PRESETS_DIR / f"{preset}.yaml"
    try:
        return ((yaml.safe_load(path.read_text()) or {}).get("experiment") or {}).get("title") or preset
    except OSError:
        return preset


def rebuild(root: Path) -> list[Path]:
    """Every preset's report and the overview from the runs table; nothing is run."""
    table = claims_mod.with_derived(results.read_runs_table(root))  # the derived bases once, not per preset
    presets = sorted(set(table["experiment"].dropna()) if "experiment" in table else set())
    presets = sorted(set(presets) | {c["preset"] for c in claims_mod.load_claims()})
    paths = []
    for preset in presets:
        plots = sorted((root / "plots" / preset).glob("*.png"))
        paths.append(write_preset_report(root, preset, preset_title(preset), table, plots))
    paths.append(write_overview(root, table))
    return paths
