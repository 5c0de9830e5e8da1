# augloader — see README.md. Targets: build test race lint fuzz bench demo clean.
GO         ?= go
BIN        := bin
VENV       := .venv
PY         := $(VENV)/bin/python
# Debian's python3 when present: the GIN example uses Debian's python3-torch
# (CPU, small) through --system-site-packages.
PYBASE     ?= $(shell [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3)
# staticcheck 2026.2.2 is module version v0.8.2
STATICCHECK_VERSION := v0.8.2
FUZZTIME   ?= 10s
BENCHCOUNT ?= 4

.PHONY: all build test race lint fuzz bench demo venv clean paper

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

# The Python side (pyarrow interop and, later, the client) lives in a
# project-local venv with pinned versions; the stamp re-runs pip only when
# the requirements change.
$(VENV)/.stamp: tests/requirements.txt clients/python/pyproject.toml
	rm -rf $(VENV)
	$(PYBASE) -m venv --system-site-packages $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -r tests/requirements.txt
	$(VENV)/bin/pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e clients/python
	touch $@

venv: $(VENV)/.stamp

# Everything CI checks: vet, the race-enabled suite, the large real datasets
# without -race (too slow under it), and the pyarrow interop tests.
test: venv
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...
	cd bench/report && $(GO) vet ./... && $(GO) test -count=1 ./...
	$(GO) test -count=1 -run 'TestRealDatasets|TestRealArchives|TestProperties|TestBoundsReal|TestIndexSameOutputsReal|TestLoad|TestBudgetsHold' ./ingest/convert/ ./aug/ ./server/ ./loader/
	$(GO) build -o $(BIN)/ ./cmd/...
	$(PY) -m pytest -q tests/interop clients/python/tests bench/peers

race:
	$(GO) test -race -count=1 ./...

lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	cd bench/report && $(GO) vet ./... && $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

# Bounded fuzzing of every fuzz target (FUZZTIME each: a duration such as
# 10s, or a count such as 2000x, which CI uses to avoid golang/go#75804).
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list 'Fuzz.*' $$pkg | grep '^Fuzz'); do \
	    echo "fuzz $$pkg $$f"; $(GO) test -run XXX -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; done

# Benchmark venv: the test venv plus PyG (the peer of the Python benchmark).
.venv-bench/.stamp: tests/requirements.txt
	rm -rf .venv-bench
	$(PYBASE) -m venv --system-site-packages .venv-bench
	.venv-bench/bin/pip install -q -r tests/requirements.txt "torch_geometric==2.5.3" "numpy<2"
	.venv-bench/bin/pip install -q --no-deps --no-build-isolation -e clients/python
	touch $@

# Every benchmark behind docs/bench.md (Go benchmarks, scaling, COLLAB and
# REDDIT-BINARY epoch stages, machine limits, the Python client against
# PyG, the COLLAB conversion), raw outputs and exact commands in
# bench/out/, then bench/report rewrites docs/bench.md and its PNGs.
bench: build .venv-bench/.stamp
	GO=$(GO) BENCHCOUNT=$(BENCHCOUNT) bash bench/run.sh

# The paper's Table 3 rows (MUTAG, PTC_MR, PROTEINS; none, NodeSam, SubMix;
# 10-fold cross-validation of GIN, one daemon per dataset) at PAPER_EPOCHS
# epochs (default 50: about 30 minutes on two cores); writes docs/paper.md
# and docs/paper-accuracy.png. Needs ../shared/datasets and torch.
PAPER_EPOCHS ?= 50
paper: build venv
	@$(PY) -c 'import matplotlib' 2>/dev/null || $(VENV)/bin/pip install -q --disable-pip-version-check "matplotlib<3.9"
	PAPER_EPOCHS=$(PAPER_EPOCHS) $(PY) examples/paper.py

# The demo on an embedded default: a seeded synthetic COLLAB-shaped dataset.
demo: build
	bash bench/demo.sh

clean:
	rm -rf $(BIN) demo bench-*.out bench/out
