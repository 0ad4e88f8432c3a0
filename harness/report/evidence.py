"""`python -m harness.report.evidence --results DIR --out DEST [--presets a,b]`: a record's evidence,
the tables its verdicts, figures and diagnoses are read from, gathered so they can be committed.

A results folder keeps one folder per run (epochs, workers, latency sample, time-stamp series)
under machine paths; a reviewer given the repository has none of them. This writes, into DEST:

    runs.parquet        the runs table (every run of the chosen presets, failed ones included: the
                        claims list what they leave out), with `run_dir` emptied and the cached
                        stream's path (`workload_events`) made relative to the results folder: no
                        machine path in docs/ (tests/test_docs_hygiene.py)
    epochs.parquet      every run's per-epoch series, with its run_id
    workers.parquet     every run's per-worker table, with its run_id
    timestamps.parquet  every run's per-time-stamp series (the kNN family), with its run_id

compressed with zstd. Left out: each run's latency-model sample (latency.parquet, about 20,000
rows a run: 34 MB for the 391 runs of the 2026-11-29 re-run, over the record's 20 MB budget).
The claims read latency from the runs table's `latency_curve`, so no verdict needs it; only a
run's latency distribution plot does. `python -m harness.report --results DEST`, `python -m harness.report.site
--results DEST` and the claims read DEST as they read a results folder: a run's per-run table
comes from its folder when it exists, else from DEST's gathered one (results.run_frame).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from harness.report import results
from harness.report.results import TABLES_DIR

COMPRESSION = "zstd"
GATHERED = ("epochs", "workers", "timestamps")  # results.PER_RUN_TABLES but the latency sample (above)
PATH_COLUMNS = ("workload_events", "dataset_cache")  # files of the results folder's cache, named by path


def portable(path, root: Path | None = None):
    """A path of a results folder as a reader can use it: relative to `root` when inside it, else
    from its `cache/` folder on (the results folder's cache), else its file name; None stays None."""
    if path is None or (isinstance(path, float) and path != path) or not str(path):
        return path
    p = Path(str(path))
    if root is not None:
        try:
            return str(p.resolve().relative_to(Path(root).resolve()))
        except ValueError:
            pass
    parts = p.parts
    return str(Path(*parts[parts.index("cache"):])) if "cache" in parts else p.name


def gather(root: Path, dest: Path, presets: list[str] | None = None) -> dict[str, tuple[int, int]]:
    """Write the evidence of `root`'s runs (of `presets`, or all) into `dest`: per table, (rows, bytes)."""
    table = results.read_runs_table(root).drop(columns=[TABLES_DIR], errors="ignore")
    if presets:
        unknown = sorted(set(presets) - set(table["experiment"].dropna()))
        if unknown:
            raise ValueError(f"presets={','.join(unknown)} have no runs in {root / 'runs.parquet'}; allowed: "
                             f"{', '.join(sorted(table['experiment'].dropna().unique()))}")
        table = table[table["experiment"].isin(presets)]
    dest.mkdir(parents=True, exist_ok=True)
    written: dict[str, tuple[int, int]] = {}
    for name in GATHERED:
        frames = []
        for _, run in table.iterrows():
            frame = results.run_frame(run, name)
            if frame is not None and len(frame):
                frames.append(frame.assign(run_id=run["run_id"]))
        path = dest / f"{name}.parquet"
        if frames:
            pd.concat(frames, ignore_index=True).to_parquet(path, index=False, compression=COMPRESSION)
            written[name] = (sum(len(f) for f in frames), path.stat().st_size)
        elif path.exists():
            path.unlink()  # a stale table of an earlier gathering would be read as this one's
    for name in set(results.PER_RUN_TABLES) - set(GATHERED):
        (dest / f"{name}.parquet").unlink(missing_ok=True)  # a table gathered no more is not evidence
    runs = table.assign(run_dir=None)
    for col in PATH_COLUMNS:
        if col in runs:
            runs[col] = runs[col].map(lambda p: portable(p, root))
    path = dest / "runs.parquet"
    runs.to_parquet(path, index=False, compression=COMPRESSION)
    written["runs"] = (len(runs), path.stat().st_size)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.report.evidence", description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default=None, help="the results folder (default: results/ or $STPS_RESULTS)")
    parser.add_argument("--out", required=True, help="where the gathered tables go (e.g. docs/reproduction/tables)")
    parser.add_argument("--presets", default=None, help="comma-separated presets (default: every run's)")
    args = parser.parse_args(argv)
    written = gather(results.results_root(args.results), Path(args.out),
                     args.presets.split(",") if args.presets else None)
    total = 0
    for name, (rows, size) in written.items():
        total += size
        print(f"{args.out}/{name}.parquet: {rows:,} rows, {size / 1e6:.2f} MB")
    print(f"evidence: {total / 1e6:.2f} MB in {len(written)} tables")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
