# make run   — install what is missing (deno from npm), build, warm up, run the example
# make test  — all tests: unit and end to end, with real deno and Pyodide
# make bench — benchmarks against the real binary
# make soak  — 2 000 calls through the supervisor: no leaked process, fd or memory

DENO_VERSION := 2.9.6
BIN          := bin/mcp-run-python
# deno on PATH, else where the official installer (and this Makefile) puts it.
DENO         ?= $(shell command -v deno 2>/dev/null || echo $(HOME)/.deno/bin/deno)
export MCP_RUN_PYTHON_DENO := $(DENO)
# Trust the system certificate store too, as npm does.
export DENO_TLS_CA_STORE ?= mozilla,system

.PHONY: run build test test-go test-js bench soak fmt clean

run: build $(DENO)
	$(BIN) warmup
	$(BIN) example

build:
	go build -trimpath -o $(BIN) ./cmd/mcp-run-python

$(HOME)/.deno/bin/deno:
	npm install --prefix $(HOME)/.deno/npm --no-audit --no-fund --loglevel=error deno@$(DENO_VERSION)
	mkdir -p $(HOME)/.deno/bin
	ln -sf $(HOME)/.deno/npm/node_modules/deno/deno $@

test: build $(DENO) test-js test-go

test-js: $(DENO)
	$(DENO) fmt --check js/ deno.json
	$(DENO) lint js/
	$(DENO) check js/worker.ts js/runner.ts

test-go:
	test -z "$$(gofmt -l .)" || { gofmt -l .; exit 1; }
	go vet ./...
	go test -count=1 -timeout 9m ./...

bench: build $(DENO)
	go test -run '^$$' -bench . -benchtime 1x -count 1 -timeout 20m ./cmd/mcp-run-python/

soak: $(DENO)
	go test -count=1 -run '^TestSoak$$' -timeout 20m -v ./supervisor/ -args -soak.calls=2000

fmt:
	gofmt -w .
	$(DENO) fmt js/ deno.json

clean:
	rm -rf bin node_modules
