# augloader — see README.md. Targets: build test race lint fuzz bench demo clean.
GO         ?= go
BIN        := bin
VENV       := .venv
VENV2      := .venv-torch2
PY         := $(VENV)/bin/python
# Debian's python3 when present: the GIN example uses Debian's python3-torch
# (CPU, small) through --system-site-packages.
PYBASE     ?= $(shell [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3)
# staticcheck 2026.2.2 is module version v0.8.2
STATICCHECK_VERSION := v0.8.2
FUZZTIME   ?= 10s
BENCHCOUNT ?= 4

.PHONY: all build test test-torch2 race lint fuzz bench demo venv clean paper stress-test wheel wheel-test s3proxy

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

# The Python side (pyarrow interop and, later, the client) lives in a
# project-local venv with pinned versions; the stamp re-runs pip only when
# the requirements change. Every pip install into a venv takes
# tests/requirements.txt as its constraints (PIP_C): a package added later
# (matplotlib for make paper) cannot move a pin (it pulled numpy 2, which
# Debian's torch 1.13 refuses to load).
PIP_C      := --disable-pip-version-check -c tests/requirements.txt
# .venv's torch, decided here rather than by whatever a dependency pulls
# (ogb's torch requirement brought PyPI's CUDA torch, 5 GB, into a .venv
# without Debian's): Debian's python3-torch (1.13, CPU, small) when the
# system's Python has it, seen through --system-site-packages ("debian");
# else .venv-torch2's, the lock's torch 2.x, shared by a .pth file
# ("torch2"): one torch on the disk either way. make test tells the tests
# which (AUGLOADER_VENV_TORCH), and clients/python/tests/test_venv.py fails
# when the venv holds another.
VENV_TORCH ?= $(shell $(PYBASE) -c 'import torch' >/dev/null 2>&1 && echo debian || echo torch2)
SITE_OF = $$($(1)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# .venv-torch2's site-packages, which a torch2.pth file in another venv
# names to share its torch (.venv without Debian's, .venv-mosaic, .venv-peers).
TORCH2_SITE = $(CURDIR)/$(VENV2)/lib/python$$($(VENV2)/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')/site-packages
$(VENV)/.stamp: tests/requirements.txt clients/python/pyproject.toml clients/python/setup.py $(if $(filter torch2,$(VENV_TORCH)),$(VENV2)/.stamp)
	rm -rf $(VENV)
	@if [ "$(VENV_TORCH)" = debian ]; then \
	  echo "$(VENV): Debian's torch, through --system-site-packages"; $(PYBASE) -m venv --system-site-packages $(VENV); \
	else \
	  echo "$(VENV): no torch in $(PYBASE): $(VENV2)'s torch, through a .pth file"; $(PYBASE) -m venv $(VENV); \
	  echo "$(TORCH2_SITE)" > "$(call SITE_OF,$(VENV))/torch2.pth"; \
	fi
	@if [ "$(VENV_TORCH)" = debian ]; then \
	  $(VENV)/bin/pip install -q $(PIP_C) -r tests/requirements.txt; \
	else \
	  echo "$(VENV): what pip would add, less what torch declares and the CPU never loads (tests/plan_pins.py)"; \
	  : "--ignore-installed: pip takes a package of another path whose name begins as this venv's (.venv-torch2's numpy) for its own and uninstalls it"; \
	  $(VENV)/bin/pip install -q $(PIP_C) --dry-run --report $(VENV)/plan.json -r tests/requirements.txt && \
	  $(VENV)/bin/python tests/plan_pins.py $(VENV)/plan.json tests/requirements-torch2.txt > $(VENV)/pins.txt && \
	  $(VENV)/bin/pip install -q $(PIP_C) --no-deps --ignore-installed -r $(VENV)/pins.txt; \
	fi
	# The client from the checkout, as a path entry (an editable install
	# needs the wheel package, which only Debian's site-packages gave).
	echo "$(CURDIR)/clients/python" > "$(call SITE_OF,$(VENV))/augloader-checkout.pth"
	echo $(VENV_TORCH) > $(VENV)/torch-source
	touch $@

# A venv a pip install outside this file moved off its pins (numpy 2
# breaks Debian's torch), or built for the other torch (Debian's installed
# or removed since), is rebuilt rather than trusted.
venv: $(VENV)/.stamp
	@[ "$$(cat $(VENV)/torch-source 2>/dev/null)" = "$(VENV_TORCH)" ] || \
	  { echo "$(VENV) was built for another torch than $(VENV_TORCH): rebuilding it"; rm -f $(VENV)/.stamp; $(MAKE) --no-print-directory $(VENV)/.stamp; }
	@$(PY) -c 'import numpy, sys; sys.exit(int(numpy.__version__.split(".")[0]) >= 2)' || \
	  { echo "$(VENV) holds numpy 2, off its pins: rebuilding it"; rm -f $(VENV)/.stamp; $(MAKE) --no-print-directory $(VENV)/.stamp; }

# Everything CI checks: vet, the race-enabled suite, the large real datasets
# without -race (too slow under it), and the pyarrow interop tests.
# Each go test line ends with a summary of what ran and what was skipped
# and why (internal/testkit/testsummary: a package whose every test
# skipped printed "ok" like any other); pytest lists its skips (-rs).
MODULE := github.com/augloader/augloader
GOTEST = bash -c 'set -o pipefail; $(GO) test -json "$$@" | $(GO) run ./internal/testkit/testsummary' gotest
# -race where it can find races: the packages whose own code runs under
# the test. The commands' packages drive the daemon and shardconv as
# separate processes built without it (only their harness was
# instrumented: cmd/augloader took 358 s under -race, 151 s without), and
# the test kit's packages (the docs' commands, the tree's rules, the
# summary, the S3 server's lifetime) run none of the product's concurrent
# code, so they run plain; cmd/augloader's
# TestSIGTERMUnderFlightWithCacheLimit runs a daemon built with -race end
# to end (GORACE=halt_on_error=1).
NORACE_PKGS := ./cmd/augloader ./cmd/shardconv ./internal/testkit/docstest ./internal/testkit/archtest \
	./internal/testkit/testsummary ./internal/testkit/s3test
# Built once: the binaries (bin/, named to every package and pytest by
# AUGLOADER_BIN, testutil.Binaries) and the fixtures every package shares
# (FIXTURES, named by AUGLOADER_FIXTURES: each synthetic set built once
# by the plain shardconv, copied and verified by each package that uses
# it; internal/testkit/fixture/shared.go), removed at the start and end.
FIXTURES   := .cache/fixtures
# pytest on two workers (pytest-xdist): most of its tests wait on the
# processes they start (daemons, torchrun agents, Slurm); PYTEST_N= runs
# it in one process.
PYTEST_N   ?= -n 2
TESTENV     = AUGLOADER_BIN=$(CURDIR)/$(BIN) AUGLOADER_FIXTURES=$(CURDIR)/$(FIXTURES)
test: venv s3proxy build
	@echo "test: building $(VENV2) in the background (log: $(VENV2_LOG)); test-torch2 waits for it"
	mkdir -p .cache && { $(MAKE) --no-print-directory $(VENV2)/.stamp > $(VENV2_LOG) 2>&1 & }
	rm -rf $(FIXTURES)
	$(GO) vet ./...
	$(TESTENV) $(GOTEST) -race -count=1 -timeout 30m $$($(GO) list ./... | grep -v -x -F $(addprefix -e $(MODULE)/,$(patsubst ./%,%,$(NORACE_PKGS))))
	$(TESTENV) $(GOTEST) -count=1 -timeout 30m $(NORACE_PKGS)
	cd bench/report && $(GO) vet ./... && $(GO) test -count=1 ./...
	$(TESTENV) $(GOTEST) -count=1 -run '^(TestRealDatasets|TestRealArchives|TestProperties|TestBoundsReal|TestIndexSameOutputsReal|TestLoad|TestBudgetsHold|TestAmplifiersBounded|TestSubMixPartnersHeldByWindow)$$' ./ingest/convert/ ./aug/ ./server/ ./loader/
	rm -rf $(FIXTURES)
	AUGLOADER_BIN=$(CURDIR)/$(BIN) AUGLOADER_VENV_TORCH=$(VENV_TORCH) $(PY) -m pytest $(PYTEST_N) -q -rs --durations=10 tests/interop clients/python/tests bench/peers \
	  $(if $(filter torch2,$(VENV_TORCH)),$(addprefix --ignore=,$(filter-out %/test_venv.py,$(TORCH2_TESTS))))
	@flock $(VENV2_LOCK) true; echo "test: $(VENV2) from the background:"; cat $(VENV2_LOG)
	$(MAKE) --no-print-directory test-torch2

# The checkpoint tests that need torch 2.x (StatefulDataLoader, Lightning,
# torch.distributed.checkpoint), the trainer's-edge oracle, the resume
# model and the state checks again (torch 2.x moves a worker's tensors to
# shared memory and counts storage uses: b497eeb's one-hot buffers went
# wrong only there), and the tensor tests again (the one-hot
# buffers' reuse rests on torch 2.x's storage use count, which .venv's
# torch lacks: a torch 2.9 change went unseen there), in their own venv: .venv keeps Debian's
# torch 1.13 (small, CPU) for everything else. The client comes from the
# checkout as a path entry: an editable install would need wheel there.
# tests/requirements-torch2.txt is a lock installed with --no-deps (it says
# why); its large wheels (torch, the NVIDIA libraries) go in one pip run
# each, without pip's cache, so the disk holds one of them in download at a
# time, then the rest in one run.
#
# make test builds it in the background while the Go tiers and .venv's
# pytest use the CPU (its 5.8 GB are mostly download: 82 to 117 s on
# machines near its index), and test-torch2 waits for it. At nice 0: beside
# it the race tier took 279 s against 238 s on an idle machine, but at
# nice 10 (e259e57) a loaded machine's busy processes starved it, and
# b8f23a1's CI beside four busy loops still waited for it half an hour
# in (its foreground build had taken 202 s, bench/results/make-test.txt).
# Two makes never build it at once: the recipe runs in a make of its own
# under a lock (VENV2_LOCK), which first looks at the stamp again (against
# the same VENV2_DEPS), so one that waited for another's build finds it
# done.
PIP_C2 := --disable-pip-version-check --no-cache-dir --no-deps
VENV2_LOCK := .cache/venv-torch2.lock
VENV2_LOG  := .cache/venv-torch2.log
VENV2_DEPS := tests/requirements-torch2.txt clients/python/pyproject.toml clients/python/setup.py
ifeq ($(VENV2_LOCKED),)
$(VENV2)/.stamp: $(VENV2_DEPS)
	mkdir -p .cache && flock $(VENV2_LOCK) $(MAKE) --no-print-directory VENV2_LOCKED=1 $@
else
$(VENV2)/.stamp: $(VENV2_DEPS)
	rm -rf $(VENV2)
	$(PYBASE) -m venv $(VENV2)
	@set -e; for p in $$(grep -E '^(torch|nvidia-[a-z0-9-]+)==' tests/requirements-torch2.txt); do \
	  echo "$(VENV2): $$p"; $(VENV2)/bin/pip install -q $(PIP_C2) "$$p"; done
	grep -v -E '^(torch|nvidia-[a-z0-9-]+)==' tests/requirements-torch2.txt > $(VENV2)/rest.txt
	$(VENV2)/bin/pip install -q $(PIP_C2) -r $(VENV2)/rest.txt
	echo "$(CURDIR)/clients/python" > "$(call SITE_OF,$(VENV2))/augloader-checkout.pth"
	touch $@
endif

# Both pytest runs take the binaries built once ($(BIN)); without
# AUGLOADER_BIN each session built them again into a temporary folder.
#
# Where .venv's torch is .venv-torch2's (no Debian torch: VENV_TORCH=torch2)
# make test's .venv run leaves these files to this one, the same torch and
# Python: they ran twice (test_venv.py, which checks each venv's choice,
# runs in both).
TORCH2_TESTS := $(addprefix clients/python/tests/,test_resume_torch2.py test_tensors.py test_edge.py test_resume_model.py \
	test_state_checks.py test_venv.py test_torchrun.py test_node_jobs.py test_elastic.py test_slurm.py test_structures.py \
	test_structures_mace.py)
test-torch2: $(VENV2)/.stamp build
	AUGLOADER_BIN=$(CURDIR)/$(BIN) AUGLOADER_TORCH2=1 $(VENV2)/bin/python -m pytest $(PYTEST_N) -q -rs --durations=10 $(TORCH2_TESTS)

# The S3-compatible server the object-storage tests start
# (internal/testkit/s3test): s3proxy's runnable jar from Maven Central,
# checked against its SHA-256, run on the machine's java (17 or later).
S3PROXY_VERSION := 2.7.0
S3PROXY_SHA256  := f3ff95bd78a7afbbcd5da56f8f6180ef71ad00601392f7e2f5a220c97ad69eef
S3PROXY_JAR     := .cache/s3proxy-$(S3PROXY_VERSION).jar
s3proxy: $(S3PROXY_JAR)
$(S3PROXY_JAR):
	mkdir -p .cache
	curl -fsSL --retry 3 -o $@.tmp https://repo1.maven.org/maven2/org/gaul/s3proxy/$(S3PROXY_VERSION)/s3proxy-$(S3PROXY_VERSION)-jar-with-dependencies.jar
	echo "$(S3PROXY_SHA256)  $@.tmp" | sha256sum -c --quiet
	mv $@.tmp $@

race:
	$(GO) test -race -count=1 ./...

lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	cd bench/report && $(GO) vet ./... && $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

# Bounded fuzzing of every fuzz target (FUZZTIME each: a duration such as
# 10s, or a count such as 2000x, which CI uses to avoid golang/go#75804).
# The targets are found in the packages' test files (func FuzzX at a
# line's start) rather than by go test -list, which links and runs every
# package's test binary, fuzz targets or not; each package's instrumented
# test binary is built once (go test -c -fuzz) and run once a target, in
# the package's folder (testdata/) with go test's fuzz cache (GOCACHE's
# fuzz/IMPORT/PATH): go test -fuzz linked it again for every target. CI's
# fuzzing took 122 s, about 70 of them linking; 80 s since. None of these
# files has a build constraint; a target one left out fails the run (no
# fuzz tests to fuzz).
FUZZBIN := $(CURDIR)/.cache/fuzzbin
fuzz:
	@set -e; rm -rf $(FUZZBIN); mkdir -p $(FUZZBIN); cache=$$($(GO) env GOCACHE)/fuzz; \
	$(GO) list -f '{{.ImportPath}} {{.Dir}}' ./... | { n=0; while read -r pkg dir; do \
	  targets=$$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$$dir"/*_test.go 2>/dev/null | sort); \
	  [ -n "$$targets" ] || continue; \
	  bin=$(FUZZBIN)/$$(echo $$pkg | tr / _).test; $(GO) test -c -fuzz=. -o $$bin $$pkg; \
	  for f in $$targets; do \
	    echo "fuzz $$pkg $$f"; n=$$((n+1)); \
	    out=$$(cd "$$dir" && $$bin -test.run=XXX -test.fuzz="^$$f$$" -test.fuzztime=$(FUZZTIME) -test.fuzzcachedir="$$cache/$$pkg" -test.timeout=10m 2>&1) || { echo "$$out"; exit 1; }; \
	    echo "$$out" | tail -n 2; \
	    if echo "$$out" | grep -q 'no fuzz tests to fuzz'; then echo "fuzz: $$pkg has no target $$f (a build constraint?)"; exit 1; fi; \
	  done; done; echo "fuzz: $$n targets, $(FUZZTIME) each"; [ $$n -gt 0 ]; }; rm -rf $(FUZZBIN)

# Benchmark venv: the test venv plus PyG (the peer of the Python benchmark).
.venv-bench/.stamp: tests/requirements.txt
	rm -rf .venv-bench
	$(PYBASE) -m venv --system-site-packages .venv-bench
	.venv-bench/bin/pip install -q $(PIP_C) -r tests/requirements.txt "torch_geometric==2.5.3"
	AUGLOADER_NO_BINARY=1 .venv-bench/bin/pip install -q $(PIP_C) --no-deps --no-build-isolation -e clients/python
	touch $@

# fairchem's CPU-graph loader, bench/python_structures.py's second peer
# (#67), in a venv of its own (fairchem 2.24 pins torch 2.13): the lock
# bench/requirements-fairchem.txt, its large wheels one pip run each.
.venv-fairchem/.stamp: bench/requirements-fairchem.txt
	rm -rf .venv-fairchem
	$(PYBASE) -m venv .venv-fairchem
	@set -e; for p in $$(grep -E '^(torch|triton|nvidia-[a-z0-9-]+)==' bench/requirements-fairchem.txt); do \
	  echo ".venv-fairchem: $$p"; .venv-fairchem/bin/pip install -q $(PIP_C2) "$$p"; done
	grep -v -E '^(#|torch==|triton==|nvidia-[a-z0-9-]+==)' bench/requirements-fairchem.txt > .venv-fairchem/rest.txt
	.venv-fairchem/bin/pip install -q $(PIP_C2) -r .venv-fairchem/rest.txt
	.venv-fairchem/bin/python -c 'from fairchem.core.datasets import AseDBDataset'
	touch $@

# MosaicML Streaming, bench/s3.sh's peer: bench/requirements-mosaic.txt
# (a lock, --no-deps) over .venv-torch2's torch, shared by a .pth file.
.venv-mosaic/.stamp: bench/requirements-mosaic.txt $(VENV2)/.stamp
	rm -rf .venv-mosaic
	$(PYBASE) -m venv .venv-mosaic
	echo "$(TORCH2_SITE)" > "$(call SITE_OF,.venv-mosaic)/torch2.pth"
	.venv-mosaic/bin/pip install -q $(PIP_C2) -r bench/requirements-mosaic.txt
	.venv-mosaic/bin/python -c 'import streaming, torch'
	touch $@

# The peers users have today (#68): PyG 2.8.1 and LitData 0.2.76 over
# .venv-torch2's torch 2.9.1 (a .pth file, as .venv-mosaic), the lock
# bench/requirements-peers.txt with --no-deps; bench/python_collab.sh,
# python_tensors.sh and python_twins.sh run in it, and bench/litdata.sh.
.venv-peers/.stamp: bench/requirements-peers.txt $(VENV2)/.stamp
	rm -rf .venv-peers
	$(PYBASE) -m venv .venv-peers
	echo "$(TORCH2_SITE)" > "$(call SITE_OF,.venv-peers)/torch2.pth"
	.venv-peers/bin/pip install -q $(PIP_C2) -r bench/requirements-peers.txt
	echo "$(CURDIR)/clients/python" > "$(call SITE_OF,.venv-peers)/augloader-checkout.pth"
	.venv-peers/bin/python -c 'import torch, torch_geometric, litdata, augloader; assert torch_geometric.__version__ == "2.8.1"'
	touch $@

# Every benchmark behind docs/bench.md (Go benchmarks, scaling, COLLAB and
# REDDIT-BINARY epoch stages, machine limits, the Python client against
# PyG, the COLLAB conversion), raw outputs and exact commands in
# bench/out/, then bench/report rewrites docs/bench.md and its PNGs.
bench: build .venv-bench/.stamp .venv-peers/.stamp .venv-mosaic/.stamp s3proxy
	GO=$(GO) BENCHCOUNT=$(BENCHCOUNT) bash bench/run.sh

# The paper's Table 3 rows (MUTAG, PTC_MR, PROTEINS; none, NodeSam, SubMix;
# 10-fold cross-validation of GIN, one daemon per dataset) at PAPER_EPOCHS
# epochs (default 50: about 30 minutes on two cores); writes docs/paper.md
# and docs/paper-accuracy.png. Needs ../shared/datasets and torch.
PAPER_EPOCHS ?= 50
paper: build venv
	@$(PY) -c 'import matplotlib' 2>/dev/null || $(VENV)/bin/pip install -q $(PIP_C) "matplotlib<3.9"
	PAPER_EPOCHS=$(PAPER_EPOCHS) $(PY) examples/paper.py

# Platform wheels with the daemon inside: the Python client and static
# augloader and shardconv executables (CGO_ENABLED=0, -trimpath) for each
# of WHEEL_ARCHES, cross-compiled, in dist/ (clients/python/setup.py; pip
# fetches setuptools into an isolated build environment).
# The host's architecture by default (the other is 51 minutes of
# cross-compiling a user of this machine does not need); wheel-test, which
# CI runs, builds and checks both. `make wheel WHEEL_ARCHES="amd64 arm64"`.
WHEEL_ARCHES ?= $(shell $(GO) env GOARCH)
# The wheel needs Go and a pip: a bare venv of the system's Python, whose
# pip fetches the build backend (setuptools) into an isolated build
# environment; not the test venv (torch, PyG: 20 minutes to build).
WHEEL_VENV := .venv-wheel
$(WHEEL_VENV)/.stamp:
	rm -rf $(WHEEL_VENV)
	$(PYBASE) -m venv $(WHEEL_VENV)
	touch $@

# Progress: a line per architecture before and after, with the time (a
# first build compiles Arrow and gRPC: many minutes, said up front).
wheel: $(WHEEL_VENV)/.stamp
	rm -f dist/augloader-*.whl
	@set -e; for a in $(WHEEL_ARCHES); do \
	  t0=$$(date +%s); \
	  echo "wheel: linux/$$a: building augloader and shardconv (static) and the wheel; a first build compiles every Go dependency (about 3 minutes on two cores), later ones take seconds"; \
	  rm -rf clients/python/build; \
	  AUGLOADER_GOARCH=$$a $(WHEEL_VENV)/bin/python -m pip wheel -q --disable-pip-version-check --no-deps -w dist clients/python; \
	  echo "wheel: linux/$$a: done in $$(( $$(date +%s) - t0 )) s"; \
	done; rm -rf clients/python/build
	@ls -l dist/augloader-*.whl

wheel-test: WHEEL_ARCHES = amd64 arm64

# The wheels as a user gets them (.ci/run runs it): static ELF binaries of
# the right architecture, and the x86_64 wheel alone in a fresh venv with no
# Go on PATH and no checkout on sys.path converting a dataset and reading a
# Daemon's epoch; then `pip install clients/python` with and without Go.
wheel-test: wheel
	PYBASE=$(PYBASE) bash tests/wheel/check.sh

# The demo on an embedded default: a seeded synthetic COLLAB-shaped dataset.
demo: build
	bash bench/demo.sh

# The whole suite STRESS_RUNS times in a row (default 5) beside two busy
# loops per core: what a flaky test has to survive before it lands.
stress-test:
	bash .ci/stress

clean:
	rm -rf $(BIN) bench-*.out bench/out stress-out
	bash bench/demo.sh clean
