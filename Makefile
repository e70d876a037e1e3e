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
FUZZ_TARGETS := ./engine/dump:FuzzSafetensors ./engine/dump:FuzzNPZ ./engine/dump:FuzzNPY ./engine/dump:FuzzPT

.PHONY: all build run test deps fmt-check vet gotest fuzz

all: build

build:
	$(GO) build -o $(BIN) ./cmd/sampviz

run: build
	./$(BIN) serve $(SERVE_FLAGS)

deps:
	$(GO) mod download

test: deps templ-check browser-deps python-deps fmt-check vet gotest fuzz python-test browser-test

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

gotest:
	$(GO) test -race -count=1 ./...

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz $$fn ($$pkg, $(FUZZTIME))"; \
		$(GO) test -run='^$$' -fuzz="^$$fn$$" -fuzztime=$(FUZZTIME) $$pkg; \
	done

# --- CUDA kernels and the GPU suite (csrc/, engine/cuda) ----------------------
# `make kernels` builds build/libsampviz_kernels.so with nvcc (sm_90 and sm_80).
# `make gpu-bundle` (here, with Go) builds the Go test binaries of engine/cuda
# and cmd/sampviz and sampviz into gpu-bundle/, gzipped so that they travel
# light (gpu_test.sh unpacks them); `make gpu-test` (on the GPU machine, no Go
# needed) builds the kernels, runs the GPU suite, compute-sanitizer on its
# quick mode, `sampviz check` and `sampviz serve` on the cuda backend over the
# scenario catalogue, and `sampviz bench`, with logs under $(GPU_OUT).
NVCC        ?= nvcc
KERNEL_LIB  := build/libsampviz_kernels.so
KERNEL_SRC  := $(wildcard csrc/*.cu)
KERNEL_OBJ  := $(patsubst csrc/%.cu,build/obj/%.o,$(KERNEL_SRC))
KERNEL_HDR  := $(wildcard csrc/*.h csrc/*.cuh)
NVCC_ARCH   ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=sm_80
# Never --use_fast_math or -ftz=true: csrc/f32math.cuh must match engine/f32math.
NVCC_FLAGS  ?= -O3 -std=c++17 -lineinfo -Xcompiler -fPIC $(NVCC_ARCH)
GPU_OUT     ?= gpu-out
GPU_TIMEOUT ?= 15m

.PHONY: kernels gpu-bundle gpu-test gpu-probe gpu-trace

kernels: $(KERNEL_LIB)

build/obj/%.o: csrc/%.cu $(KERNEL_HDR)
	@mkdir -p build/obj
	$(NVCC) $(NVCC_FLAGS) -c -o $@ $<

$(KERNEL_LIB): $(KERNEL_OBJ)
	$(NVCC) $(NVCC_FLAGS) -shared -o $@ $(KERNEL_OBJ)

gpu-bundle:
	rm -rf gpu-bundle && mkdir -p gpu-bundle
	CGO_ENABLED=0 $(GO) test -c -o gpu-bundle/cuda.test ./engine/cuda
	CGO_ENABLED=0 $(GO) test -c -o gpu-bundle/sampviz.test ./cmd/sampviz
	CGO_ENABLED=0 $(GO) build -o gpu-bundle/sampviz ./cmd/sampviz
	gzip -f gpu-bundle/cuda.test gpu-bundle/sampviz.test gpu-bundle/sampviz

gpu-test:
	GPU_OUT=$(GPU_OUT) GPU_TIMEOUT=$(GPU_TIMEOUT) bash csrc/gpu_test.sh

# `make gpu-probe` (on the GPU machine) times simple reference kernels on the
# bench's shapes: what a kernel of each op's traffic can reach (docs/PERF.md);
# PROBE=split times softmax as a statistics kernel and a write kernel per
# slice of rows instead (docs/PERF.md, run 92), PROBE=tma with the chunk
# in shared memory by a bulk load and the outputs by the threads or by bulk
# stores (softmax v6; runs 99-100), PROBE=tma2 v5's two reads with bulk
# stores (run 102), PROBE=queue statistics and write tasks from a global
# counter (run 106).
PROBE ?=
gpu-probe:
	@mkdir -p build
	$(NVCC) -O3 -std=c++17 -arch=sm_90 -o build/bwprobe csrc/probe/bwprobe.cu
	build/bwprobe $(PROBE)

# `make gpu-trace` (on the GPU machine) builds renorm with phase stamps
# (csrc/trace.cuh, -DSV_TRACE) beside the library and prints where one
# filtered launch of TRACE_ROWS rows spends its time, step by step
# (csrc/probe/trace.cu, docs/PERF.md); TRACE_MODE=p times top-p alone,
# which the full-row kernel serves by distinct value (csrc/patterns.cuh).
TRACE_ROWS ?= 1
TRACE_MODE ?=
gpu-trace:
	@mkdir -p build/trace
	$(NVCC) -O3 -std=c++17 -Xcompiler -fPIC -arch=sm_90 -DSV_TRACE -shared \
	  -o build/trace/libsampviz_trace.so csrc/renorm.cu csrc/runtime.cu
	$(NVCC) -O3 -std=c++17 -arch=sm_90 -o build/trace/trace csrc/probe/trace.cu \
	  -Lbuild/trace -lsampviz_trace -Xlinker -rpath,$(CURDIR)/build/trace
	build/trace/trace $(TRACE_ROWS) $(TRACE_MODE)

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
	@if [ -x /usr/bin/chromium ]; then exit 0; fi; \
	echo "browser-deps: installing Debian's chromium for the browser test"; \
	sudo=; if [ "$$(id -u)" != 0 ]; then sudo=sudo; fi; \
	if ! { $$sudo apt-get update && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y chromium; }; then \
		echo "browser-deps: could not install chromium"; \
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
