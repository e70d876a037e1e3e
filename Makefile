# sampviz: `make run` starts the product, `make test` runs every test.
# Both install what they need (Go modules, templ through `go tool templ`,
# Debian's chromium for the browser tests).

GO      ?= go
BIN     := bin/sampviz
# Fuzzing per target in `make test`: a count of inputs rather than seconds,
# which avoids Go's fuzz-runner deadline flake (golang/go#75804) and takes
# about 3 s a target on 2 cores.
FUZZTIME ?= 30000x
# Fuzz targets, as package:FuzzName.
FUZZ_TARGETS := ./engine/dump:FuzzSafetensors ./engine/dump:FuzzNPZ ./engine/dump:FuzzNPY ./engine/dump:FuzzPT ./engine/session:FuzzJob

.PHONY: all build run test deps fmt-check vet tidy-check gotest memory-test fuzz

all: build

build:
	@if [ ! -x $(BIN) ]; then echo "build: compiling sampviz (a first build downloads the Go modules and takes a minute or two)"; fi
	$(GO) build -o $(BIN) ./cmd/sampviz

run: build
	./$(BIN) serve $(SERVE_FLAGS)

deps:
	$(GO) mod download

test: deps templ-check browser-deps python-deps fmt-check vet tidy-check gotest memory-test fuzz python-test browser-test

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

# go.mod and go.sum must be what `go mod tidy` writes.
tidy-check:
	@$(GO) mod tidy -diff >/dev/null 2>&1 || { echo "go mod tidy would change go.mod or go.sum:"; $(GO) mod tidy -diff; exit 1; }

# The tests that measure a process's peak memory run without the race
# detector, which multiplies memory (they skip under -race).
memory-test:
	$(GO) test -count=1 -run 'TestMemoryBudget|TestHostileCorpus' ./cmd/sampviz/

gotest:
	$(GO) test -race -count=1 ./...

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz $$fn ($$pkg, $(FUZZTIME))"; \
		$(GO) test -run='^$$' -fuzz="^$$fn$$" -fuzztime=$(FUZZTIME) $$pkg; \
	done

# --- CUDA kernels and the GPU suite (csrc/, engine/cuda) ----------------------
# `make kernels` builds build/libsampviz_kernels.so with nvcc for the archs
# in SAMPVIZ_ARCHS (default sm_90 and sm_80; `make kernels
# SAMPVIZ_ARCHS=sm_90` builds one, for iterating on an H100). Every .cu of
# csrc/ and csrc/instances/ is one object, compiled with its archs side by
# side (--threads); csrc/instances/ holds the heavy kernels, an op's family
# and dtype each, so that `make -j16` spreads them over the cores
# (docs/PERF.md, "Kernel build"). Objects live in a folder per arch set,
# depend on the headers they include (nvcc -MMD), and go through ccache
# where it is installed.
# `make gpu-bundle` (here, with Go) builds the Go test binaries of engine/cuda
# and cmd/sampviz and sampviz into gpu-bundle/, gzipped so that they travel
# light (gpu_test.sh unpacks them); `make gpu-test` (on the GPU machine, no Go
# needed) builds the kernels, runs the GPU suite, compute-sanitizer on its
# quick mode, `sampviz check` and `sampviz serve` on the cuda backend over the
# scenario catalogue, and `sampviz bench`, with logs under $(GPU_OUT)
# (csrc/dev/gpu_test.sh; STAGES picks the steps).
NVCC          ?= nvcc
NVCC_LAUNCHER ?= $(shell command -v ccache 2>/dev/null)
SAMPVIZ_ARCHS ?= sm_90 sm_80
empty         :=
space         := $(empty) $(empty)
KERNEL_LIB    := build/libsampviz_kernels.so
# The longest compiles first (make -j starts them in this order): softmax,
# the tree verifier, then the instances.
KERNEL_SRC    := csrc/softmax.cu csrc/spec_tree_verify.cu $(wildcard csrc/instances/*.cu) \
                 $(filter-out csrc/softmax.cu csrc/spec_tree_verify.cu,$(wildcard csrc/*.cu))
# `make kernels SV_TREE=0` leaves spec_tree_verify's kernel out of the
# library (a fallback should it not build): engine/cuda then refuses the
# op and points to --backend cpu.
SV_TREE       ?= 1
ifeq ($(SV_TREE),0)
KERNEL_SRC    := $(filter-out csrc/spec_tree_verify.cu,$(KERNEL_SRC))
endif
KERNEL_DIR    := build/obj/$(subst $(space),-,$(strip $(SAMPVIZ_ARCHS)))
KERNEL_OBJ    := $(patsubst csrc/%.cu,$(KERNEL_DIR)/%.o,$(KERNEL_SRC))
KERNEL_ARCHS  := build/obj/archs
NVCC_ARCH     ?= $(foreach a,$(SAMPVIZ_ARCHS),-gencode arch=compute_$(a:sm_%=%),code=$(a))
# Never --use_fast_math or -ftz=true: csrc/f32math.cuh must match engine/f32math.
NVCC_FLAGS    ?= -O3 -std=c++17 -lineinfo -Xcompiler -fPIC --threads 0 $(NVCC_ARCH)
GPU_OUT       ?= gpu-out
GPU_TIMEOUT   ?= 15m

.PHONY: kernels gpu-bundle gpu-test gpu-tree gpu-peers-tree gpu-peers gpu-probe FORCE

kernels: $(KERNEL_LIB)

$(KERNEL_DIR)/%.o: csrc/%.cu
	@mkdir -p $(@D)
	$(NVCC_LAUNCHER) $(NVCC) $(NVCC_FLAGS) -MMD -MP -MF $(@:.o=.d) -c -o $@ $<

-include $(KERNEL_OBJ:.o=.d)

# The library is relinked when the arch set or SV_TREE changes, so that it
# never keeps another set's objects.
KERNEL_STAMP  := $(strip $(SAMPVIZ_ARCHS)) tree=$(SV_TREE)
$(KERNEL_ARCHS): FORCE
	@mkdir -p $(@D)
	@echo '$(KERNEL_STAMP)' | cmp -s - $@ || echo '$(KERNEL_STAMP)' >$@

$(KERNEL_LIB): $(KERNEL_OBJ) $(KERNEL_ARCHS)
	$(NVCC) $(NVCC_FLAGS) -shared -o $@ $(KERNEL_OBJ)

# The bundle's binaries travel to the GPU machine with the working tree, 64
# MiB in all: they are stripped (panics still name their functions) and read
# the scenarios from the tree's scenarios/ folder (-tags external_scenarios)
# rather than carrying them.
BUNDLE_FLAGS := -ldflags=-s\ -w -tags external_scenarios

gpu-bundle:
	rm -rf gpu-bundle && mkdir -p gpu-bundle
	CGO_ENABLED=0 $(GO) test -c $(BUNDLE_FLAGS) -o gpu-bundle/cuda.test ./engine/cuda
	CGO_ENABLED=0 $(GO) test -c $(BUNDLE_FLAGS) -o gpu-bundle/sampviz.test ./cmd/sampviz
	CGO_ENABLED=0 $(GO) build $(BUNDLE_FLAGS) -o gpu-bundle/sampviz ./cmd/sampviz
	gzip -f gpu-bundle/cuda.test gpu-bundle/sampviz.test gpu-bundle/sampviz

gpu-test:
	GPU_OUT=$(GPU_OUT) GPU_TIMEOUT=$(GPU_TIMEOUT) bash csrc/dev/gpu_test.sh

# `make gpu-tree` (on the GPU machine, after make gpu-bundle here) checks
# spec_tree_verify's kernel alone in one call: the build (falling back to
# SV_TREE=0 when the tree unit does not build), its GPU tests, memcheck,
# the tree scenarios on the cuda backend and its bench rows
# (csrc/dev/tree_check.sh).
gpu-tree:
	GPU_OUT=$(GPU_OUT) bash csrc/dev/tree_check.sh

# `make gpu-peers-tree` (on the GPU machine, torch only: no Go, no kernels)
# times csrc/dev/tree_peer.py, a torch implementation of spec_tree_verify's
# rule vectorised over rows (eager and torch.compile), on the bench's tree
# cases; TREE_PEER_FLAGS passes its options (--cases all, --no-compile, ...).
TREE_PEER_FLAGS ?=
gpu-peers-tree:
	$(GPU_PYTHON) csrc/dev/tree_peer.py $(TREE_PEER_FLAGS)

# `make gpu-peers` (on the GPU machine, after make gpu-bundle here) runs
# `sampviz bench --peers`: python/peers.py's torch, torch.compile and Triton
# peers timed by $(GPU_PYTHON) beside each case, on the inputs our worker
# wrote for it; the table goes to $(GPU_OUT)/peers.txt, the JSON to
# $(GPU_OUT)/peers.json. PEERS_FLAGS picks the cases (default: the shapes of
# docs/PERF.md's peer table, about three minutes on an H100);
# SAMPVIZ_PEERS_FLAGS passes options to the script (--no-compile,
# --compile-budget 300, ...).
PEERS_FLAGS ?= --match 'softmax bf16 B=512|argmax bf16 B=128 V=128256|sample k50 p0.9 bf16 B=512|sample p0.9 (no top-k) bf16 B=512|sample gumbel|spec_verify bf16 B=128|spec_verify q bf16 B=128|spec_tree_verify topk4 bf16 B=64'
gpu-peers: kernels
	@if [ -e gpu-bundle/sampviz.gz ]; then gunzip -f gpu-bundle/sampviz.gz; fi; \
	[ -x gpu-bundle/sampviz ] || { echo "no gpu-bundle/sampviz: run make gpu-bundle where Go is"; exit 1; }
	@mkdir -p $(GPU_OUT)
	./gpu-bundle/sampviz bench --kernels $(KERNEL_LIB) --peers --python $(GPU_PYTHON) --json $(GPU_OUT)/peers.json $(PEERS_FLAGS) | tee $(GPU_OUT)/peers.txt

# `make gpu-probe` (on the GPU machine) times simple reference kernels on the
# bench's shapes: what a kernel of each op's traffic can reach (docs/PERF.md).
# PROBE names one of csrc/dev/bwprobe.cu's other probes (its header lists
# them); they time designs of softmax that the library does not use.
PROBE ?=
gpu-probe:
	@mkdir -p build
	$(NVCC) -O3 -std=c++17 -arch=sm_90 -o build/bwprobe csrc/dev/bwprobe.cu
	build/bwprobe $(PROBE)

# --- web UI (web/, `sampviz serve`) --------------------------------------------
# `make run` passes SERVE_FLAGS to `sampviz serve` (--listen, --data, --token,
# --backend, --max-upload, ...). `templ-check` fails when `go tool templ
# generate` would change the committed web/*_templ.go; `templ` regenerates
# them. `browser-deps` installs Debian's chromium for web/e2e's browser test
# when it is missing (as root, or through sudo); when that fails the test
# skips, unless SAMPVIZ_REQUIRE_BROWSER=1 (CI) makes it fail. `browser-test`
# runs that test alone, after the others: it times the page's main thread,
# which tests running beside it would distort (`go test ./...` skips it);
# its screenshots land in $(SCREENSHOTS).
SERVE_FLAGS ?=
# Where browser-test saves its screenshots (build/ is ignored by git).
SCREENSHOTS ?= build/screenshots

.PHONY: templ templ-check browser-deps browser-test

templ:
	$(GO) tool templ generate -path web

templ-check:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	cp -R web "$$tmp/web" && \
	{ out=$$($(GO) tool templ generate -path "$$tmp/web" 2>&1) || { echo "$$out"; exit 1; }; } && \
	if ! diff -r -q web "$$tmp/web" >/dev/null; then \
		echo "go tool templ generate would change:"; diff -r -q web "$$tmp/web"; \
		echo "run 'make templ' and commit the result"; exit 1; \
	fi

browser-deps:
	@if [ -x /usr/bin/chromium ] && command -v node >/dev/null; then exit 0; fi; \
	mkdir -p build; \
	echo "browser-deps: installing Debian's chromium and nodejs for the browser test and static/numfmt.js's (about 150 packages, a minute or two; log in build/browser-deps.log)"; \
	sudo=; if [ "$$(id -u)" != 0 ]; then sudo=sudo; fi; \
	if ! { $$sudo apt-get update && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y chromium nodejs; } >build/browser-deps.log 2>&1; then \
		echo "browser-deps: could not install chromium and nodejs (build/browser-deps.log)"; \
		if [ "$$SAMPVIZ_REQUIRE_BROWSER" = 1 ]; then exit 1; fi; \
		echo "browser-deps: the browser test will skip"; \
	fi

browser-test: browser-deps
	SAMPVIZ_BROWSER_TEST=1 SAMPVIZ_SCREENSHOTS=$(abspath $(SCREENSHOTS)) $(GO) test -count=1 -v -run Browser ./web/e2e/

# --- the capture module (python/) -----------------------------------------------
# `python-deps` installs Debian's python3-torch and python3-numpy for
# $(PYTHON) when they are missing (about 230 packages: a minute or two; the
# apt output goes to build/python-deps.log); when that fails the python tests
# skip, unless SAMPVIZ_REQUIRE_PYTHON=1 (CI) makes it a failure.
# `python-test` runs python/test_sampviz_capture.py against bin/sampviz.
# `gpu-capture` (on the GPU machine, whose $(GPU_PYTHON) has torch and
# transformers) runs python/gpu_capture_check.py with gpu-bundle's sampviz:
# real generations through the capture hooks, every dump judged, with its
# output under $(GPU_OUT)/capture.
PYTHON     ?= /usr/bin/python3
GPU_PYTHON ?= python3

.PHONY: python-deps python-test gpu-capture

python-deps:
	@if $(PYTHON) -c 'import torch, numpy' 2>/dev/null; then exit 0; fi; \
	mkdir -p build; \
	echo "python-deps: installing Debian's python3-torch and python3-numpy (a minute or two; log in build/python-deps.log)"; \
	sudo=; if [ "$$(id -u)" != 0 ]; then sudo=sudo; fi; \
	if ! { $$sudo apt-get update && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y python3-torch python3-numpy; } >build/python-deps.log 2>&1; then \
		echo "python-deps: could not install them (build/python-deps.log)"; \
		if [ "$$SAMPVIZ_REQUIRE_PYTHON" = 1 ]; then exit 1; fi; \
		echo "python-deps: the python tests will skip"; \
	fi

python-test: python-deps build
	SAMPVIZ_BIN=$(abspath $(BIN)) $(PYTHON) -m unittest discover -s python -p 'test_*.py'

gpu-capture:
	@if [ -e gpu-bundle/sampviz.gz ]; then gunzip -f gpu-bundle/sampviz.gz; fi; \
	[ -x gpu-bundle/sampviz ] || { echo "no gpu-bundle/sampviz: run make gpu-bundle where Go is"; exit 1; }
	$(GPU_PYTHON) python/gpu_capture_check.py --sampviz gpu-bundle/sampviz --out $(GPU_OUT)/capture

# --- scenario catalogue (scenarios/) -------------------------------------------
# `make scenarios` regenerates every scenario folder's dump and scenario.json
# from fixed seeds (go run ./scenarios/gen); each README.md is written by hand
# and left alone. The same bytes come out every time, and `make test` fails
# when the committed files differ from what the generator writes.

.PHONY: scenarios

scenarios:
	$(GO) run ./scenarios/gen -dir scenarios
# --- end of scenario catalogue -----------------------------------------------
