# sampviz: `make run` starts the product, `make test` runs every test.
# Both install what they need (Go modules, templ through `go tool templ`,
# Debian's chromium for the browser tests).

GO      ?= go
BIN     := bin/sampviz
# Seconds of fuzzing per target in `make test`.
FUZZTIME ?= 3s
# Fuzz targets, as package:FuzzName.
FUZZ_TARGETS :=

.PHONY: all build run test deps fmt-check vet gotest fuzz

all: build

build:
	$(GO) build -o $(BIN) ./cmd/sampviz

run: build
	./$(BIN) check --example

deps:
	$(GO) mod download

test: deps fmt-check vet gotest fuzz

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
