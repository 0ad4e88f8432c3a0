"""MLflow runs logged in a process of their own (a sweep's), and in the thread when that process
cannot take them: the same runs either way, in a real sqlite store."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import pytest

from harness.report import results


def _logged(root, process):
    logger = results.MlflowLogger(root, "t", process=process)
    run_dir = root / "run"
    run_dir.mkdir()
    (run_dir / "metrics.json").write_text("{}")
    seen = []
    for i in range(3):
        logger.log_run(f"r{i}", {"workers": 4}, {"throughput_eps": 10.0 * i, "status": "ok"}, run_dir, None,
                       [{"epoch": 1, "throughput_eps": 5.0}], done=lambda err, s: seen.append((err, s)))
    logger.wait()
    import mlflow

    client = mlflow.MlflowClient(results.tracking_uri(root))
    runs = client.search_runs([client.get_experiment_by_name("t").experiment_id])
    return seen, sorted((r.info.run_name, r.data.metrics["throughput_eps"], r.info.status) for r in runs), client, runs


@pytest.mark.parametrize("broken", [False, True])
def test_a_process_logs_the_same_runs_as_the_thread(tmp_path, broken, monkeypatch):
    process = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    if broken:
        process.shutdown()  # it cannot take them: the thread logs them
    else:  # the process logs them (its own copy of the module): the driver's would only fail
        monkeypatch.setattr(results, "_log_child_run", lambda *a: "logged in the driver")
    try:
        seen, runs, client, found = _logged(tmp_path, process)
    finally:
        process.shutdown()
    assert [err for err, _ in seen] == [None] * 3 and all(s > 0 for _, s in seen)
    assert runs == [("r0", 0.0, "FINISHED"), ("r1", 10.0, "FINISHED"), ("r2", 20.0, "FINISHED")]
    one = found[0]
    assert one.data.params["workers"] == "4"
    assert [m.step for m in client.get_metric_history(one.info.run_id, "epoch_throughput_eps")] == [1]
    assert {a.path for a in client.list_artifacts(one.info.run_id)} == {"metrics.json", "metric_units.json"}
