"""`make reproduce PAPERS=all|ps2stream|sstd|skype|tornado|dkmsks|scale|sizes`: every preset of the chosen
papers at its default size, one after another, resumable (each preset runs with resume=true, so a
run whose configuration already has an ok row is skipped), with one progress line per preset over
the whole batch (presets done, runs done, an estimate of the time left), then every report and the
results site (results/site/, harness/report/site/__init__.py) rebuilt from the runs table and a summary of
the verdicts per paper on both bases.

A paper's presets are those named after it (`sstd_*`, `skype_*` and `dskype_*` for Skype/DSkype,
...) and every preset a claim of that paper reads; the scale presets (`scale_*`) join only with
PAPERS=scale, the size sweeps (`size_*`, harness/run/sizes.py, one step at a time) only with
PAPERS=sizes. Each preset runs in its own process (`python -m harness experiment=<name>`), its log
under results/reproduce/logs/.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from harness.report import claims as claims_mod
from harness.report import results, site, time_budget
from harness.report.claims import report as claims_report

PAPERS = {"ps2stream": ("ps2stream_",), "sstd": ("sstd_",), "tornado": ("tornado_",), "dkmsks": ("dkmsks_",),
          "skype": ("skype_", "dskype_"), "scale": ("scale_",),
          "sizes": ("size_",)}
OPT_IN = ("scale", "sizes")  # groups whose presets join only when named
CLAIM_PAPER = {"skype": "dskype"}  # conf/claims.yaml names Skype/DSkype's claims "dskype"
DEFAULT = ("ps2stream", "sstd", "tornado", "dkmsks", "skype")


def presets_of(papers: list[str], claims: list[dict] | None = None) -> list[str]:
    """The presets a reproduction of `papers` runs, in a stable order (by paper, then name): those
    named after each paper, then those its claims read."""
    names = sorted(p.stem for p in claims_mod.PRESETS_DIR.glob("*.yaml"))
    claims = claims_mod.load_claims() if claims is None else claims
    out: list[str] = []
    for paper in papers:
        own = [n for n in names if n.startswith(PAPERS[paper])]
        read = sorted({c["preset"] for c in claims if c.get("paper") == CLAIM_PAPER.get(paper, paper)})
        for name in own + read:
            opt_in = [g for g in OPT_IN if name.startswith(PAPERS[g])]
            if name not in out and (not opt_in or paper in opt_in):
                out.append(name)
    return out


def paper_of_presets(papers: list[str], claims: list[dict] | None = None) -> dict[str, str]:
    """preset -> the paper it is run for: the first of `papers` whose reproduction runs it (as
    `presets_of` orders them), so each preset's time is counted for one paper."""
    claims = claims_mod.load_claims() if claims is None else claims
    out: dict[str, str] = {}
    for paper in papers:
        for preset in presets_of([paper], claims):
            out.setdefault(preset, paper)
    return out


def paper_times(done: list[tuple], paper_of: dict[str, str]) -> list[str]:
    """The per-paper table of a reproduction: each paper's presets, runs and wall time (the sum of
    its presets' processes, one after another), failed presets counted and named."""
    rows: dict[str, list] = {}
    for preset, code, seconds, new_runs in done:
        row = rows.setdefault(paper_of.get(preset, "?"), [0, 0, 0.0, []])
        row[0] += 1
        row[1] += new_runs
        row[2] += seconds
        if code != 0:
            row[3].append(preset)
    lines = ["| paper | presets | new runs | wall time | failed |", "|---|---:|---:|---:|---|"]
    lines += [f"| {paper} | {n} | {runs} | {_clock(s)} | {', '.join(bad) or '-'} |"
              for paper, (n, runs, s, bad) in rows.items()]
    lines.append(f"| **all** | {sum(r[0] for r in rows.values())} | {sum(r[1] for r in rows.values())} | "
                 f"**{_clock(sum(r[2] for r in rows.values()))}** | |")
    return lines


def parse_papers(text: str) -> list[str]:
    chosen = [p.strip() for p in text.split(",") if p.strip()]
    if chosen == ["all"]:
        return list(DEFAULT)
    bad = [p for p in chosen if p not in PAPERS]
    if bad or not chosen:
        raise SystemExit(f"PAPERS={text!r} is invalid; allowed: all, or a comma-separated list of "
                         f"{', '.join(PAPERS)}")
    return chosen


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _runs_of(root: Path, preset: str) -> int:
    if not (root / "runs.parquet").exists():
        return 0
    table = results.read_runs_table(root)
    return int((table.get("experiment") == preset).sum()) if "experiment" in table else 0


def run_preset(preset: str, root: Path, extra: list[str], log: Path) -> tuple[int, float]:
    """One preset in its own process (its output to `log`): (exit code, seconds)."""
    env = {**os.environ, "STPS_RESULTS": str(root)}
    cmd = [sys.executable, "-m", "harness", f"experiment={preset}", "resume=true", "progress=false", *extra]
    if preset.startswith(PAPERS["sizes"]):  # a size sweep step by step, each step's time, memory and failure recorded
        cmd = [sys.executable, "-m", "harness.run.sizes", preset, "--results", str(root), *extra]
    t0 = time.perf_counter()
    with log.open("w") as out:
        out.write(" ".join(cmd) + "\n")
        out.flush()
        code = subprocess.run(cmd, cwd=results.PROJECT_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT).returncode
    return code, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.run.reproduce", description=__doc__.split("\n\n")[0])
    parser.add_argument("--papers", default="all", help="all, or a comma-separated list of " + ", ".join(PAPERS))
    parser.add_argument("--results", default=None, help="the results folder (default: results/ or $STPS_RESULTS)")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides passed to every preset (e.g. measure.repeat=3)")
    args = parser.parse_args(argv)
    papers = parse_papers(args.papers)
    root = results.results_root(args.results)
    logs = root / "reproduce" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    timing_file = root / "reproduce" / "durations.json"
    known = json.loads(timing_file.read_text()) if timing_file.exists() else {}
    presets = presets_of(papers)
    print(f"reproduce {', '.join(papers)}: {len(presets)} presets ({', '.join(presets)}); logs in {logs}", flush=True)
    t0, done, failed = time.perf_counter(), [], []
    for i, preset in enumerate(presets):
        before = _runs_of(root, preset)
        code, seconds = run_preset(preset, root, args.overrides, logs / f"{preset}.log")
        new_runs = _runs_of(root, preset) - before
        done.append((preset, code, seconds, new_runs))
        if code != 0:
            failed.append(preset)
        elif new_runs:  # a fully resumed preset says nothing about its cost
            known[preset] = seconds
            timing_file.write_text(json.dumps(known, indent=1))
        left = presets[i + 1:]
        mean = sum(s for _, c, s, n in done if c == 0 and n) / max(1, sum(1 for _, c, _, n in done if c == 0 and n))
        estimate = sum(known.get(p, mean) for p in left)
        print(f"[{i + 1}/{len(presets)} presets, {_clock(time.perf_counter() - t0)} elapsed, about {_clock(estimate)} "
              f"left] {preset}: {'ok' if code == 0 else f'FAILED (exit {code}, see its log)'} in {_clock(seconds)}, "
              f"{new_runs} new runs", flush=True)
    print("rebuilding the reports from the runs table", flush=True)
    paths = claims_report.rebuild(root) if (root / "runs.parquet").exists() else []
    if paths:
        site.build(results.read_runs_table(root), root / "site", runs_file=root / "runs.parquet")
        paths.append(root / "site" / "index.html")
    summary = write_summary(root, papers, done, time.perf_counter() - t0)
    for path in [*paths[-2:], summary]:
        print(f"wrote: {path}")
    print(summary.read_text())
    return 1 if failed else 0


def write_summary(root: Path, papers: list[str], done: list[tuple], wall_s: float) -> Path:
    """results/reproduce/summary.md: each preset's time and runs, and the verdict counts per paper."""
    lines = [f"# Reproduction of {', '.join(papers)}", "",
             f"Wall time {_clock(wall_s)} on {os.cpu_count()} cores, code version {results.code_version()}.", "",
             "## Wall time per paper", "", *paper_times(done, paper_of_presets(papers)), "",
             "## Per preset", "",
             "| preset | status | time | new runs |", "|---|---|---:|---:|"]
    lines += [f"| {p} | {'ok' if c == 0 else f'failed ({c})'} | {_clock(s)} | {n} |" for p, c, s, n in done]
    if (root / "runs.parquet").exists():  # the chosen papers' claims, tallied as the reports tally them
        table = results.read_runs_table(root)
        names = {CLAIM_PAPER.get(p, p) for p in papers}
        verdicts = [r for r in claims_mod.evaluate_all(table) if r.claim.get("paper") in names]
        lines += [""] + claims_report.tally_table(verdicts)
        lines += [""] + claims_report.not_exercised(verdicts)
        lines += claims_report.derived_note(verdicts)
        measured = [(p, s) for p, c, s, n in done if c == 0 and n]
        if measured:
            lines += ["", "## Where the time went", "",
                      "Seconds per cost of each preset that ran (resumed presets left out), from its runs' rows "
                      "(harness/report/time_budget.py): the invocations' Spark start, data preparation and oracle, "
                      "the strategies' fit, the measured work (every repetition), the rest of each run's driver time, "
                      "and the preset process beyond its runs (Python, Hydra and JVM start, figures, reports).", "",
                      *time_budget.budget_table(table, measured, results.code_version())]
    path = root / "reproduce" / "summary.md"
    path.write_text("\n".join(lines) + "\n")
    return path


if __name__ == "__main__":
    sys.exit(main())
