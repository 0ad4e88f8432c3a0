"""What runs during a run and reads its measurements: the run's metrics (run_metrics.py), its
summary over the repetitions (summary.py), the queue model's latency (latency.py), the network
model (network.py) and the per-time-stamp figures (timestamps.py). Above the engine, below
harness.run; the registry that names every figure is harness/report/metrics.py, and judging
(harness/report/claims/, harness/report/site/) never imports this package: it reads the runs
table only.
"""
