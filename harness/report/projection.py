"""Projected compute at the papers' scale (issue 51 part 2): each operation's cost on this machine,
fitted per strategy from timed runs at small sizes, times the counts of a larger run (a count-mode
run at the paper's size, or a timed run's own counters) gives each worker's CPU time there, and so
the busiest worker's, the dispatchers' and the compute-only throughput: the "projected" basis.

The worker model (one per strategy, by the runs' `variant`; its terms and why):

    busy_s = c_event * events            every message a worker receives (object copies,
                                         subscription insert/delete copies, snapshot queries):
                                         decoding and handing it to the index
           + c_update * (inserts+deletes) the index update a subscription message costs beyond that
           + c_candidate * candidates    subscriptions (or objects) checked against a message: the
                                         filter's inner loop, what grows with the size
           + c_result * results          a match emitted
           + c_snapshot * snapshot_checks SSTD's snapshot queries' checks of stored objects
           + c_reeval * reevaluations    Skype's top-k lists recomputed against the window
           + c_epoch * epochs            a fixed cost per worker and measured epoch (the kernel's
                                         call, the batch's setup)

with every c >= 0 (non-negative least squares, scipy.optimize.nnls), fitted on the (run, worker)
rows of the strategy's timed runs, each row weighted by 1/busy_s so that the fit minimises the
relative error (the runs span orders of magnitude, and the claims compare ratios); rows busy under
MIN_BUSY_S (the timer's noise) are left out. A term that is zero in every row of a strategy gets no
constant. The dispatchers' model, per strategy on the runs table: dispatcher_s = d_event *
events / dispatchers + d_copy * messages_routed / dispatchers + d_epoch * epochs (routing splits
the events evenly over the dispatchers, harness/measure/run_metrics.py). Projected throughput =
events / max(busiest worker's projected busy time, projected dispatcher time); migration stalls
(`pause_s`) are not projected.

Not modelled, on purpose: a constant per operation does not change with the index's size (cache
misses, a deeper tree); the validation against timed runs larger than the fitted ones measures what
that costs (`validate`, docs/reproduction/2026-11-29/projection/).

`python -m harness.report.projection --results DIR --fit KEY=V,... [--predict KEY=V,...]
[--counts FOLDER ...]`: the constants, their fit, and the projection of the selected timed runs (with
its error against what they measured) or of count-mode folders (harness/counts/).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from harness.core.fitting import nnls_relative
from harness.report import results

TERMS = ("events", "updates", "candidates", "results", "snapshot_checks", "reevaluations", "epochs")
DISPATCH_TERMS = ("events", "messages", "epochs")
MIN_BUSY_S = 1e-3  # rows (workers, dispatchers) busy less than this are the timer's noise: not fitted
KEYS = ("experiment", "variant", "dataset", "workload", "workers", "x", "facet")  # a run's cell, as count runs name it


@dataclass
class Fit:
    """One strategy's per-operation constants (seconds per unit of each term) and how well they fit."""

    key: str
    terms: tuple[str, ...]
    costs: np.ndarray
    rows: int  # (run, worker) rows fitted
    runs: int
    rel_rms: float  # root mean square of the rows' relative residuals
    r2: float  # of busy_s, unweighted
    busiest_err: np.ndarray  # per fitted run: projected / measured busiest worker - 1
    dispatch_terms: tuple[str, ...] = DISPATCH_TERMS
    dispatch_costs: np.ndarray = field(default_factory=lambda: np.zeros(len(DISPATCH_TERMS)))
    dispatch_rel_rms: float = float("nan")
    throughput_err: np.ndarray = field(default_factory=lambda: np.zeros(0))  # per fitted run, in sample

    def cost(self, term: str) -> float:
        return float(self.costs[self.terms.index(term)]) if term in self.terms else 0.0

    @property
    def band(self) -> float:
        """The relative band a projection carries: the RMS of the fitted runs' throughput errors."""
        e = self.throughput_err[np.isfinite(self.throughput_err)]
        return float(np.sqrt(np.mean(e ** 2))) if len(e) else float("nan")


def _col(frame: pd.DataFrame, name: str) -> np.ndarray:
    return pd.to_numeric(frame[name], errors="coerce").fillna(0).to_numpy(np.float64) if name in frame \
        else np.zeros(len(frame))


def worker_terms(workers: pd.DataFrame, epochs) -> np.ndarray:
    """The model's terms (TERMS, in order) of each row of a workers table: a timed run's (`events`) or
    a count run's summed over its measured epochs (`messages_in`); `epochs`: each row's measured
    epochs (a number or an array)."""
    events = _col(workers, "events") if "events" in workers else _col(workers, "messages_in")
    cols = {"events": events, "updates": _col(workers, "inserts") + _col(workers, "deletes"),
            "candidates": _col(workers, "candidates"), "results": _col(workers, "results"),
            "snapshot_checks": _col(workers, "snapshot_checks"), "reevaluations": _col(workers, "reevaluations"),
            "epochs": np.broadcast_to(np.asarray(epochs, np.float64), (len(workers),)).copy()}
    return np.column_stack([cols[t] for t in TERMS]) if len(workers) else np.zeros((0, len(TERMS)))


def _epochs(runs: pd.DataFrame) -> np.ndarray:
    """Each run's measured epochs (1 where the runs table does not say)."""
    e = pd.to_numeric(runs["epochs"], errors="coerce") if "epochs" in runs else pd.Series(np.nan, index=runs.index)
    return e.fillna(1).clip(lower=1).to_numpy(np.float64)


def _dispatcher_s(runs: pd.DataFrame) -> np.ndarray:
    """A dispatcher's time per run as throughput_compute_eps divides by it: its share of the routing
    (`route_s`, already over the dispatchers) and its upkeep (`observe_s`); `dispatcher_s` itself
    where a table keeps it."""
    if "dispatcher_s" in runs:
        return _col(runs, "dispatcher_s")
    return _col(runs, "route_s") + _col(runs, "observe_s")


def _runs(runs: pd.DataFrame) -> pd.DataFrame:
    runs = results.labelled(runs)
    return runs[runs["status"] == "ok"] if "status" in runs else runs


def dispatch_terms(events, messages, dispatchers, epochs) -> np.ndarray:
    nd = np.maximum(np.asarray(dispatchers, np.float64), 1.0)
    return np.column_stack([np.asarray(events, np.float64) / nd, np.asarray(messages, np.float64) / nd,
                            np.asarray(epochs, np.float64) * np.ones_like(nd)])


def fit_costs(runs: pd.DataFrame, workers: pd.DataFrame, by: str = "variant") -> dict[str, Fit]:
    """Per strategy (`by`: the runs' variant), its constants from its timed runs' workers table
    (`workers`: one row per run and worker, with run_id) and runs table (module docstring)."""
    runs = _runs(runs)
    missing = [c for c in ("run_id", "busy_s") if c not in workers]
    if missing:
        raise ValueError(f"the workers table has no {', '.join(missing)}; allowed: a timed run's workers table "
                         "(results folder or a record's tables/workers.parquet)")
    if not len(runs):
        return {}
    info = runs[["run_id", by]].assign(_epochs=_epochs(runs))
    rows = workers.drop(columns=[by, "_epochs"], errors="ignore").merge(info, on="run_id", how="inner")
    fits = {}
    for key, g in rows.groupby(by, sort=True):
        a = worker_terms(g, g["_epochs"].to_numpy())
        y = _col(g, "busy_s")
        ok = y >= MIN_BUSY_S
        if ok.sum() < 2:
            continue
        costs = nnls_relative(a[ok], y[ok])
        pred = a @ costs
        rel = (pred[ok] - y[ok]) / y[ok]
        ss = float(((y[ok] - y[ok].mean()) ** 2).sum())
        r2 = 1 - float(((pred[ok] - y[ok]) ** 2).sum()) / ss if ss > 0 else float("nan")
        per_run = pd.DataFrame({"run_id": g["run_id"].to_numpy(), "pred": pred, "y": y}).groupby("run_id").max()
        busiest = (per_run["pred"] / per_run["y"] - 1).to_numpy()
        rr = runs[runs[by] == key]
        d = dispatch_terms(_col(rr, "events"), _col(rr, "messages_routed"), _col(rr, "dispatchers"),
                           _epochs(rr))
        dy = _dispatcher_s(rr)
        dok = dy >= MIN_BUSY_S
        dcosts = np.zeros(len(DISPATCH_TERMS))
        if dok.any():  # fewer runs than terms: the per-event cost alone (one run fits any split)
            use = slice(None) if dok.sum() > len(DISPATCH_TERMS) else slice(0, 1)
            dcosts[use] = nnls_relative(d[dok][:, use], dy[dok])
        drms = float(np.sqrt(np.mean(((d[dok] @ dcosts - dy[dok]) / dy[dok]) ** 2))) if dok.any() else float("nan")
        fit = Fit(str(key), TERMS, costs, int(ok.sum()), int(g["run_id"].nunique()),
                  float(np.sqrt(np.mean(rel ** 2))), r2, busiest, DISPATCH_TERMS, dcosts, drms)
        proj = project_runs({str(key): fit}, rr, g, by)
        if len(proj):
            fit.throughput_err = proj["throughput_err"].to_numpy()
        fits[str(key)] = fit
    return fits


def project(fit: Fit, terms: np.ndarray, events: float, messages: float, dispatchers: float,
            epochs: float) -> dict:
    """One run's projection from its workers' terms (rows: workers) and its routing counts."""
    busy = terms @ fit.costs if len(terms) else np.zeros(0)
    worker_s = float(busy.max()) if len(busy) else 0.0
    disp_s = float((dispatch_terms([events], [messages], [dispatchers], [epochs]) @ fit.dispatch_costs)[0])
    bottleneck = max(worker_s, disp_s, 1e-12)
    return {"busiest_worker_s": worker_s, "dispatcher_s": disp_s, "bottleneck": "workers" if worker_s >= disp_s
            else "dispatchers", "throughput_eps": events / bottleneck}


def project_runs(fits: dict[str, Fit], runs: pd.DataFrame, workers: pd.DataFrame, by: str = "variant") -> pd.DataFrame:
    """Each timed run's projection from its own counters (its workers table), beside what it measured:
    the validation of constants fitted on other (smaller) runs."""
    runs = _runs(runs)
    runs = runs.assign(_epochs=_epochs(runs))
    out = []
    for _, r in runs.iterrows():
        fit = fits.get(str(r[by]))
        w = workers[workers["run_id"] == r["run_id"]]
        if fit is None or not len(w):
            continue
        p = project(fit, worker_terms(w, r["_epochs"]), float(r["events"]), float(r["messages_routed"]),
                    float(r["dispatchers"]), r["_epochs"])
        out.append({"run_id": r["run_id"], by: r[by], **{k: r.get(k) for k in KEYS if k != by},
                    **p, "measured_busiest_worker_s": float(_col(w, "busy_s").max()),
                    "measured_dispatcher_s": float(_dispatcher_s(r.to_frame().T)[0]),
                    "measured_throughput_eps": float(r["throughput_compute_eps"])})
    frame = pd.DataFrame(out)
    if len(frame):
        frame["busiest_err"] = frame["busiest_worker_s"] / frame["measured_busiest_worker_s"] - 1
        frame["throughput_err"] = frame["throughput_eps"] / frame["measured_throughput_eps"] - 1
    return frame


# ------------------------------------------------------------------------------------ count runs


def count_run_key(meta: dict) -> str:
    """A count run's strategy as the runs table names it (`results.labelled`: an adjuster appended)."""
    label = str(meta.get("label") or meta.get("strategy"))
    adjust = meta.get("adjust")
    return f"{label} + {adjust}" if adjust and adjust != "none" and not label.endswith(f" + {adjust}") else label


def read_count_run(folder: Path) -> dict:
    """A count-mode folder (harness/counts/app.py): its meta and its measured epochs' totals per
    worker (terms) and for the dispatchers."""
    folder = Path(folder)
    meta = json.loads((folder / "meta.json").read_text())
    workers = pd.read_parquet(folder / "counts_workers.parquet")
    workers = workers[workers["epoch"] > 0]
    measured = int(workers["epoch"].nunique())
    per_worker = workers.groupby("worker").sum(numeric_only=True)
    epochs = pd.read_parquet(folder / "counts_epochs.parquet")
    events = float(epochs.loc[epochs["epoch"] > 0, "events_full"].sum())
    disp = pd.read_parquet(folder / "counts_dispatchers.parquet") if (folder / "counts_dispatchers.parquet").exists() \
        else pd.DataFrame()
    messages = float(disp.loc[disp["epoch"] > 0, "messages_out"].sum()) if len(disp) else \
        float(epochs.loc[epochs["epoch"] > 0, ["object_copies", "query_copies"]].sum().sum())
    return {"folder": folder, "meta": meta, "key": count_run_key(meta), "terms": worker_terms(per_worker, measured),
            "events": events, "messages": messages, "dispatchers": float(meta.get("dispatchers") or 1),
            "epochs": float(measured), "run_keys": meta.get("run_keys") or {}}


def count_folders(root: Path) -> list[Path]:
    """The count-mode folders under a results folder (or a record's tables): <root>/counts/*/."""
    return sorted(p.parent for p in (Path(root) / "counts").glob("*/meta.json")) if root else []


def project_counts(fits: dict[str, Fit], folders: list[Path]) -> pd.DataFrame:
    """Each count run's projection (no measurement to compare with: the paper's size)."""
    out = []
    for folder in folders:
        c = read_count_run(folder)
        fit = fits.get(c["key"])
        if fit is None:
            out.append({"folder": Path(folder).name, "variant": c["key"], "events": c["events"],
                        "note": f"no timed runs of {c['key']} to fit its constants"})
            continue
        p = project(fit, c["terms"], c["events"], c["messages"], c["dispatchers"], c["epochs"])
        out.append({"folder": Path(folder).name, "variant": c["key"], "events": c["events"], **p,
                    "band": fit.band, **{f"key_{k}": v for k, v in c["run_keys"].items()}})
    return pd.DataFrame(out)


def _norm(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, (int, float, np.integer, np.floating)) and float(v).is_integer():
        return str(int(v))
    return str(v)


def projected_throughput(runs: pd.DataFrame, workers: pd.DataFrame, root: Path | None) -> pd.DataFrame:
    """The projected basis of the claims (harness/report/claims/bases.py): per run of the table, the
    projected compute-only throughput of the count run of its cell at the largest size counted
    (count runs under <root>/counts/ whose `run_keys` name the same experiment, variant, dataset,
    workload, workers, x and facet), with the constants fitted on the usable timed runs of its
    strategy in the same preset; a band of the fit's in-sample throughput RMS error either side. Empty
    when no count run matches: the claims then show no projected column."""
    folders = count_folders(root) if root is not None else []
    counted = [read_count_run(f) for f in folders]
    counted = [c for c in counted if c["run_keys"]]
    if not counted or not len(runs) or workers is None or not len(workers):
        return pd.DataFrame(columns=["value", "lo", "hi", "note"])
    by_cell: dict[tuple, dict] = {}
    for c in counted:
        cell = tuple(_norm(c["run_keys"].get(k)) for k in KEYS[:1]) + (c["key"],) + tuple(
            _norm(c["run_keys"].get(k)) for k in KEYS[2:])
        if cell not in by_cell or c["events"] > by_cell[cell]["events"]:
            by_cell[cell] = c
    usable = runs
    if "too_short" in usable:
        usable = usable[~(pd.to_numeric(usable["too_short"], errors="coerce").fillna(0) > 0)]
    # the constants of a strategy on its preset's own runs: pooled over presets, one strategy's
    # constants mix workloads whose operations cost differently (the record's SSTD and range presets)
    wanted = {cell[0] for cell in by_cell}
    exp = usable["experiment"].map(_norm) if "experiment" in usable else pd.Series("", index=usable.index)
    fits = {e: fit_costs(usable[exp == e], workers) for e in wanted}
    lab = results.labelled(runs)
    out = {}
    for _, r in lab.iterrows():
        cell = tuple(_norm(r.get(k)) for k in KEYS)
        c = by_cell.get(cell)
        fit = fits.get(cell[0], {}).get(str(r["variant"])) if c is not None else None
        if c is None or fit is None:
            continue
        p = project(fit, c["terms"], c["events"], c["messages"], c["dispatchers"], c["epochs"])
        v, band = p["throughput_eps"], fit.band if np.isfinite(fit.band) else 0.0
        size = c["meta"].get("workload", {}).get("queries")
        out[r["run_id"]] = {"value": v, "lo": v / (1 + band), "hi": v * (1 + band),
                            "note": f"projected at {c['events']:,.0f} measured events"
                                    + (f", {int(size):,} queries" if isinstance(size, (int, float)) else "")
                                    + f" (count run {Path(c['folder']).name}; constants from {fit.runs} timed runs, "
                                      f"band +-{band:.0%})"}
    return pd.DataFrame.from_dict(out, orient="index", columns=["value", "lo", "hi", "note"])


# ------------------------------------------------------------------------------------------- CLI


def select(runs: pd.DataFrame, spec: str | None) -> pd.DataFrame:
    """The runs a selector names: `key=v1|v2,key=v`, keys of the runs table (e.g.
    experiment=size_dkmsks,x=20000); None: every run."""
    runs = results.labelled(runs)
    if not spec:
        return runs
    for part in spec.split(","):
        if "=" not in part:
            raise ValueError(f"selector part {part!r} is invalid; allowed: key=value[|value...] (e.g. x=20000)")
        k, v = part.split("=", 1)
        if k not in runs:
            raise ValueError(f"selector key {k!r} is not a runs-table column; allowed: e.g. experiment, variant, x, "
                             "workload, workers, dataset")
        allowed = set(v.split("|"))
        runs = runs[runs[k].map(_norm).isin(allowed)]
    return runs


def workers_table(root: Path, runs: pd.DataFrame) -> pd.DataFrame:
    """Every run's workers table with its run_id (a record's gathered one, else each run folder's)."""
    gathered = Path(root) / "workers.parquet"
    if gathered.exists():
        w = pd.read_parquet(gathered)
        return w[w["run_id"].isin(runs["run_id"])]
    frames = [f.assign(run_id=r["run_id"]) for _, r in runs.iterrows()
              if (f := results.run_frame(r, "workers")) is not None]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["run_id", "busy_s"])


def constants_markdown(fits: dict[str, Fit]) -> list[str]:
    unit = {"epochs": "ms"}
    head = ["| strategy | runs | rows | " + " | ".join(f"{t} ({unit.get(t, 'ns')})" for t in TERMS)
            + " | row RMS rel. err | R^2 | dispatch event / copy (ns) | dispatch RMS |",
            "|---|---:|---:|" + "---:|" * len(TERMS) + "---:|---:|---|---:|"]
    for key, f in sorted(fits.items()):
        vals = [f"{f.cost(t) * (1e3 if t == 'epochs' else 1e9):.4g}" for t in TERMS]
        head.append(f"| {key} | {f.runs} | {f.rows} | " + " | ".join(vals)
                    + f" | {f.rel_rms:.1%} | {f.r2:.3f} | {f.dispatch_costs[0] * 1e9:.4g} / "
                      f"{f.dispatch_costs[1] * 1e9:.4g} | {f.dispatch_rel_rms:.1%} |")
    return head


def validation_markdown(frame: pd.DataFrame) -> list[str]:
    if frame.empty:
        return ["No run to predict."]
    lines = ["| strategy | run | cell | busiest worker measured / projected (s) | error | throughput measured / "
             "projected (events/s) | error | projected bottleneck |", "|---|---|---|---:|---:|---:|---:|---|"]
    for _, r in frame.sort_values(["variant", "workload", "workers"]).iterrows():
        cell = f"{r.get('workload')}/{r.get('dataset')}/{_norm(r.get('workers'))}w x={_norm(r.get('x'))}"
        lines.append(f"| {r['variant']} | `{r['run_id']}` | {cell} | {r['measured_busiest_worker_s']:.4g} / "
                     f"{r['busiest_worker_s']:.4g} | {r['busiest_err']:+.1%} | {r['measured_throughput_eps']:,.0f} / "
                     f"{r['throughput_eps']:,.0f} | {r['throughput_err']:+.1%} | {r['bottleneck']} |")
    return lines


def _frame_markdown(frame: pd.DataFrame) -> list[str]:
    """A small frame as a Markdown table (numbers to 4 significant digits)."""
    if frame.empty:
        return ["none"]
    show = lambda v: f"{v:.4g}" if isinstance(v, (float, np.floating)) else str(v)  # noqa: E731
    return (["| " + " | ".join(map(str, frame.columns)) + " |", "|" + "---|" * len(frame.columns)]
            + ["| " + " | ".join(show(v) for v in row) + " |" for row in frame.itertuples(index=False)])


def error_summary(frame: pd.DataFrame) -> str:
    if frame.empty:
        return "no run predicted"
    b, t = frame["busiest_err"].abs(), frame["throughput_err"].abs()
    return (f"{len(frame)} runs: busiest worker |error| median {b.median():.1%}, max {b.max():.1%}; "
            f"throughput |error| median {t.median():.1%}, max {t.max():.1%}; "
            f"throughput error mean {frame['throughput_err'].mean():+.1%}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.report.projection", description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default=None, help="results folder or a record's tables (default: results/ or "
                                                          "$STPS_RESULTS)")
    parser.add_argument("--fit", default=None, help="the timed runs the constants are fitted on: key=v1|v2,key=v "
                                                     "(runs-table columns; default: every usable run)")
    parser.add_argument("--predict", default=None, help="timed runs to project from their own counters and compare "
                                                         "with what they measured (same selector syntax)")
    parser.add_argument("--counts", nargs="*", default=[], help="count-mode folders to project (harness/counts/)")
    parser.add_argument("--out", default=None, help="write the Markdown here, and the validation as <out>.parquet")
    args = parser.parse_args(argv)
    root = results.results_root(args.results)
    try:
        every = results.read_runs_table(root)
        fit_runs = select(every, args.fit)
        pred_runs = select(every, args.predict) if args.predict else fit_runs.iloc[0:0]
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if "too_short" in fit_runs:
        fit_runs = fit_runs[~(pd.to_numeric(fit_runs["too_short"], errors="coerce").fillna(0) > 0)]
    fits = fit_costs(fit_runs, workers_table(root, fit_runs))
    lines = ["## Constants (fitted on " + (f"`{args.fit}`" if args.fit else "every run") + ")", "",
             *constants_markdown(fits), ""]
    frame = pd.DataFrame()
    if args.predict:
        frame = project_runs(fits, pred_runs, workers_table(root, pred_runs))
        lines += [f"## Projection of `{args.predict}` from those constants", "", *validation_markdown(frame), "",
                  f"Error: {error_summary(frame)}.", ""]
    if args.counts:
        proj = project_counts(fits, [Path(f) for f in args.counts])
        lines += ["## Count runs projected", "", *_frame_markdown(proj), ""]
    text = "\n".join(lines) + "\n"
    if args.out:
        Path(args.out).write_text(text)
        if len(frame):
            frame.to_parquet(Path(args.out).with_suffix(".parquet"), index=False)
        print(f"written: {args.out}")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
