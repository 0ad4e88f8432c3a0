# Entry points of the harness. Every target creates the virtual environment first if needed.
PY      := .venv/bin/python
STAMP   := .venv/.installed
export SPARK_LOCAL_IP := 127.0.0.1
export PYSPARK_PYTHON := $(abspath $(PY))
# the registry decides which strategies a sweep covers
STRATEGIES = $(shell $(PY) -c "from strategies import registry; print(','.join(registry.supporting('range')))")
SWEEP_WORKERS ?= 2,4,8,16
SWEEP_WORKLOADS ?= sts_q1,sts_q2,sts_q3
ARGS ?=

WORKERS ?= 2
CORES ?= 1
MEMORY ?= 2g

.PHONY: venv browser run test test-cluster sweep experiment reproduce report site record plots docs bench bench-check mlflow-ui clean cluster-up cluster-status cluster-down

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	@echo "compiling the default run's numba kernels once (the range family, its four strategies), in process"
	$(PY) -m harness.engine.warmup --default-run
	touch $(STAMP)

# Every other family's kernels compile once before the tests and the presets need them (about 3 min):
# numba caches a kernel only once it ran, and test workers or Spark's Python workers compiling the
# same kernel at once would each pay it. `make run` needs only the default run's (above).
KERNELS := .venv/.kernels-all
$(KERNELS): $(STAMP)
	@echo "compiling every family's kernels once: a tiny stream of each through every strategy, in process (about 3 min)"
	$(PY) -m harness.engine.warmup
	touch $(KERNELS)

run: $(STAMP)  ## the default experiment: the four baseline strategies on STS-Q1, 8 workers, comparison table (ARGS=strategy=all: every one)
	$(PY) -m harness $(ARGS)

# The results site's browser test drives Debian's headless Chromium through its driver; nothing
# downloads a browser at run time. Installed here when missing, so `make test` passes by itself on
# a fresh machine (as root, or through sudo); otherwise the command to run is named.
BROWSER_PACKAGES := chromium chromium-driver
browser:  ## the system's headless Chromium and chromedriver (Debian's packages) for the site's browser test, installed when missing
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then exit 0; fi; \
	  echo "installing Debian's $(BROWSER_PACKAGES) for the results site's browser test (once)"; \
	  if [ "$$(id -u)" = 0 ]; then as=""; elif command -v sudo >/dev/null 2>&1; then as="sudo"; else \
	    echo "make test needs $(BROWSER_PACKAGES): run 'apt-get update && apt-get install -y $(BROWSER_PACKAGES)' as root" >&2; exit 2; fi; \
	  { $$as apt-get update -q && $$as env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(BROWSER_PACKAGES); } >/tmp/stps-browser-install.log 2>&1 \
	    || { tail -20 /tmp/stps-browser-install.log >&2; echo "installing $(BROWSER_PACKAGES) failed (log above)" >&2; exit 2; }; \
	  command -v chromium && command -v chromedriver

TEST_PROCS ?= 2
test: $(KERNELS) browser  ## the test suite in TEST_PROCS processes (tiny workloads, real Spark, MLflow and Hydra; the slow cluster fault tests are make test-cluster's)
	$(PY) -m pytest -q -m "not slow" -n $(TEST_PROCS) $(ARGS)

test-cluster: $(KERNELS)  ## every test that starts a real standalone cluster on loopback (make test runs the fast one), and the other slow ones
	$(PY) -m pytest -q -m "cluster or slow" $(ARGS)

cluster-up: $(STAMP)  ## a standalone master and WORKERS workers (CORES, MEMORY each) on 127.0.0.1 from the venv; prints the master URL
	$(PY) -m harness.run.cluster up --workers $(WORKERS) --cores $(CORES) --memory $(MEMORY)

cluster-status: $(STAMP)  ## the processes cluster-up started and the master's view of its workers
	$(PY) -m harness.run.cluster status

cluster-down: $(STAMP)  ## stop only what cluster-up started, by the pids it recorded
	$(PY) -m harness.run.cluster down

sweep: $(KERNELS)  ## strategy x workers x workload (a job per workers x workload, its strategies sharing Spark jobs), one MLflow parent run, then the plots of its results folder (drawn when the multirun ends; resumes: runs already ok are skipped)
	$(PY) -m harness -m strategy=all 'strategy.include=[$(STRATEGIES)]' workers=$(SWEEP_WORKERS) workload=$(SWEEP_WORKLOADS) \
	    workload.queries=5000 workload.updates=4000 dataset.size=100000 tag=sweep resume=true $(ARGS)

experiment: $(KERNELS)  ## a published experiment as a preset: make experiment NAME=<conf/experiment/*.yaml> [ARGS=scale=paper]
	@test -n "$(NAME)" || { echo "usage: make experiment NAME=<name>; presets: $$(ls conf/experiment | sed 's/.yaml//' | tr '\n' ' ')"; exit 2; }
	@test -f conf/experiment/$(NAME).yaml || { echo "no preset conf/experiment/$(NAME).yaml; presets: $$(ls conf/experiment | sed 's/.yaml//' | tr '\n' ' ')"; exit 2; }
	$(PY) -m harness experiment=$(NAME) $(ARGS)

PAPERS ?= all
reproduce: $(KERNELS)  ## every preset of PAPERS (all, or ps2stream,sstd,skype,tornado,dkmsks; scale: the scale_* presets; sizes: the size_* sweeps, step by step) at its default size, resumable, then every report, the results site (results/site/) and a summary of the verdicts (results/reproduce/summary.md)
	$(PY) -m harness.run.reproduce --papers $(PAPERS) $(ARGS)

report: $(STAMP)  ## every preset's report.md and results/report.md (the claims on both bases) rebuilt from results/runs.parquet, nothing run
	$(PY) -m harness.report $(ARGS)

site: $(STAMP)  ## the results site, static and offline, from results/runs.parquet: results/site/index.html (per-paper figures beside the published text, claims on both bases, strategy pages, CSV/Parquet downloads)
	$(PY) -m harness.report.site $(ARGS)

RECORD ?= docs/reproduction
record: $(STAMP)  ## the site, then its overview as Markdown, the figures and a screenshot into RECORD (docs/reproduction: the dated record of the last full make reproduce)
	$(PY) -m harness.report.site --record $(RECORD) $(ARGS)

plots: $(STAMP)  ## PNG plots from results/runs.parquet into results/plots/
	$(PY) -m harness.report.plots

docs: $(STAMP)  ## regenerate the generated docs (a test fails when one is stale): docs/metrics.md's table from the metrics registry, docs/decisions/README.md (the decision records by subsystem), docs/architecture.md's module tree, docs/claims/README.md; after merging pending records: python -m tools.adr --number-pending
	$(PY) -m harness.report.metrics --write-docs docs/metrics.md
	$(PY) -m tools.adr
	$(PY) -m tools.module_tree
	$(PY) -m harness.report.site.claim_pages index

bench: $(KERNELS)  ## pytest-benchmark figures, each with its ratio to a baseline measured in the same run
	$(PY) -m pytest benchmarks -q -p no:cacheprovider --benchmark-columns=min,mean,ops --benchmark-sort=name $(ARGS)

bench-check: $(KERNELS)  ## the gate: the small-scale benchmarks marked gate, each fast path's ratio to its fair baseline paired in the same run asserted (benchmarks/conftest.py GATES; about 2-3 min)
	STPS_BENCH_SCALE=small $(PY) -m pytest benchmarks -q -p no:cacheprovider -m gate --bench-gate --benchmark-disable $(ARGS)

mlflow-ui: $(STAMP)  ## the MLflow UI on 127.0.0.1 over results/
	mkdir -p results
	$(PY) -m mlflow ui --host 127.0.0.1 --port 5000 --backend-store-uri sqlite:///$(abspath results)/mlflow.db

clean:  ## remove generated results (keeps the environment)
	rm -rf results outputs multirun
