# The two commands a newcomer needs:
#   make demo   a local control plane with sample nodes and workloads, and the operator placing them
#   make test   lint, type-check and every test (unit, property, and against the real control plane)
# Both install what they need first (a virtualenv in .venv, the control plane binaries in
# ~/.cache/orca-testcp, built from the Go module proxy on first use: allow 10-20 minutes).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

.PHONY: demo demo-stop test lint unit integration controlplane prometheus dashboard bench chaos clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@

controlplane:
	bash hack/testcp/build.sh >/dev/null

# prometheus + promtool for the monitoring tests: installed (Debian package) when missing and
# root, else a one-line error; the tests fail, never skip, without them.
prometheus:
	bash hack/install-prometheus.sh

# Regenerate the Grafana dashboard from controller/dashboard.py (a unit test fails on drift).
dashboard: $(STAMP)
	$(BIN)/orca dashboard > manifests/monitoring/grafana-dashboard.json

demo: $(STAMP) controlplane
	bash hack/demo.sh start

demo-stop: $(STAMP)
	bash hack/demo.sh stop

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: $(STAMP) prometheus
	$(BIN)/pytest tests/unit

integration: $(STAMP) controlplane prometheus
	$(BIN)/pytest tests/integration

test: lint controlplane prometheus
	$(BIN)/pytest

bench: $(STAMP) controlplane
	$(BIN)/python bench/bench_scheduler.py
	$(BIN)/python bench/bench_operator.py

# The chaos suite at full size (minutes; a short run of each scenario is part of `make test`):
# 50 operator SIGKILLs, apiserver/etcd SIGKILLs, expired watches, split brain, token rotation,
# a 10,000-Workload burst at 5,000 Nodes. CHAOS_ARGS="--only burst --burst-workloads 2000" etc.
chaos: $(STAMP) controlplane
	$(BIN)/python bench/chaos.py $(CHAOS_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
