"""When DSkype's replication ratio (Table 5, `stored_replication`) is read, and the top-k presets'
windows: the runs read it at the measured epochs' ends, after the first thresholds prune the
replicas that the warm-up's registrations (theta = 0, every keyword's worker) made, so the prefix
method's figure is that of the prefixes the thresholds give (skype.txt l.650-665, l.819); the
DSkype presets cut the measured part into epochs of a tenth of |W| (thresholds over 90% of the
window); Skype's Fig. 14 preset measures a tenth of the window (l.743)."""

from __future__ import annotations

import numpy as np
import pytest

from datasets.tiny import random_objects
from datasets.workloads.anomalies import normalise_prefix
from harness.core.events import INSERT
from harness.engine.assembly import assemble_run, oracle_digest
from harness.engine.epochs import epoch_bounds
from harness.engine.executors import InProcessExecutor
from harness.engine.loop import run_epochs
from harness.engine.simulate import default_context
from harness.core.events import format_digest
from harness.families import registry as families
from harness.families.workload import WorkloadConfig
from harness.measure.summary import stored_replication
from strategies import registry
from tests.run.test_experiments import composed

WINDOW = 600


@pytest.fixture(scope="module")
def stream():
    objects, df, extent = random_objects(3000, seed=4, vocab=400)
    cfg = WorkloadConfig(name="t", family="topk", queries=300, window=WINDOW, measured_messages=WINDOW // 2,
                         k_min=5, k_max=5)
    wl = families.get("topk").build_workload(objects, df, extent, cfg, 3)
    return normalise_prefix(wl.events, wl.warmup)[:2]


def _run(stream, name: str, n_workers: int = 8):
    events, warmup = stream
    cls = registry.get(name)
    run = assemble_run(cls, events, warmup, default_context(events), n_workers, {})
    router = cls().fit(run.sample, n_workers, cls.make_params(None), run.context)
    loop = run_epochs(InProcessExecutor(events, run.setup, n_workers), router, events, run.setup,
                      epoch_bounds(events, warmup, "count", WINDOW // 10), None, n_workers, 1)
    digest = format_digest(sum(e.result_count for e in loop.epochs),
                           sum(e.result_hash for e in loop.epochs) % (1 << 64))
    assert digest == oracle_digest(events, run.families)  # the results stay the oracle's
    live = int((events.kind[:warmup] == INSERT).sum())
    at_start = sum(st["restored"] for st in loop.measured[0].worker_stats.values()) / live
    return loop.measured, at_start


def test_prefix_replication_is_read_after_the_first_thresholds_prune(stream):
    events, warmup = stream
    keyword, keyword_start = _run(stream, "dskype_keyword")
    prefix, prefix_start = _run(stream, "dskype_prefix")
    # the warm-up registers every subscription with theta = 0: prefix holds keyword's copies then
    assert prefix_start == pytest.approx(keyword_start)
    assert sum(st.get("replicas_dropped", 0) for st in prefix[0].worker_stats.values()) > 0  # thresholds pruned
    read = stored_replication(prefix, events, warmup)
    assert read < prefix_start  # read after the pruning, not at the measured part's start
    live = int((events.kind[:warmup] == INSERT).sum())
    ends = [sum(st["kept"] for st in e.worker_stats.values()) / live for e in prefix]
    assert read == pytest.approx(np.mean(ends)) and len(ends) > 1
    # keyword never prunes: the same figure at every point
    assert stored_replication(keyword, events, warmup) == pytest.approx(keyword_start)


DSKYPE_PRESETS = ["dskype_mechanisms", "dskype_k", "dskype_subscriptions", "dskype_workers", "dskype_hybrid",
                  "size_dskype"]


@pytest.mark.parametrize("name", DSKYPE_PRESETS)
@pytest.mark.parametrize("window", [None, 30000])
def test_dskype_presets_cut_epochs_of_a_tenth_of_the_window(name, window):
    extra = [f"workload.window={window}"] if window else []
    cfg = composed(f"experiment={name}", "workload=topk_q", *extra)
    assert cfg.epochs.by == "count" and int(cfg.epochs.size) == int(cfg.workload.window) // 10
    assert int(cfg.epochs.size) < int(cfg.workload.measured_messages)  # more than one measured epoch


@pytest.mark.parametrize("extra", [[], ["workload.window=30000"], ["scale=paper"]])
def test_skype_fig14_preset_measures_a_tenth_of_the_window(extra):
    cfg = composed("experiment=skype_reevaluation", "workload=topk_q", *extra)
    assert int(cfg.workload.measured_messages) * 10 == int(cfg.workload.window)
