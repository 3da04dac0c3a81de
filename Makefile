# make run   — install what is missing (deno from npm), build, warm up, run the example
# make test  — all tests: unit and end to end, with real deno and Pyodide,
#              and the MCP conformance suite (see make conformance)
# make conformance — only the official MCP conformance suite, run by deno
#              against streamable_http, with testdata/conformance/baseline.yml
# make bench — benchmarks against the real binary
# make soak  — 2 000 calls through the supervisor: no leaked process, fd or memory;
#              400 concurrent calls' log notifications in order
# make cross — build, vet and compile the tests for every platform of a release
# make image-test — build the container image and check the running container
#              (needs a Docker engine; says SKIPPED and exits 0 without one)
# make base-images — make the Dockerfile's base images without a registry
#              (debootstrap, as root; docs/DEPLOY.md, "An air-gapped build")
# make docs  — regenerate docs/FLAGS.md from the flag set (a test fails when it is stale)
#
# The recipes use only POSIX sh and flags that BSD tools share, and nothing
# newer than GNU make 3.81, so that macOS's own make runs them.

DENO_VERSION := 2.9.6
BIN          := bin/mcp-run-python
# deno on PATH, else where the official installer (and this Makefile) puts it.
DENO         ?= $(shell command -v deno 2>/dev/null || echo $(HOME)/.deno/bin/deno)
export MCP_RUN_PYTHON_DENO := $(DENO)
# Trust the system certificate store too, as npm does.
export DENO_TLS_CA_STORE ?= mozilla,system
# The checks of the Dockerfile and deploy/kubernetes/ against the program: a
# module of their own, so that the Kubernetes and BuildKit modules they need
# are not requirements of the program's, which `go install` downloads. The
# main module's ./... does not reach into it.
DEPLOYCHECK  := cmd/mcp-run-python/internal/config/deploycheck
# The platforms of a release (.goreleaser.yaml), as GOOS/GOARCH.
PLATFORMS    := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64

.PHONY: run build test test-go test-js conformance bench soak cross image-test base-images docs fmt clean

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
	$(DENO) fmt --check js/ deno.json testdata/tssdk/client.ts
	$(DENO) lint js/
	$(DENO) check js/worker.ts js/runner.ts
	$(DENO) check --no-config --lock=testdata/tssdk/deno.lock --frozen-lockfile testdata/tssdk/client.ts
	$(DENO) test --allow-read --allow-write js/

# go.mod and go.sum must be tidy as committed (-diff changes nothing).
test-go:
	test -z "$$(gofmt -l .)" || { gofmt -l .; exit 1; }
	go mod tidy -diff
	cd $(DEPLOYCHECK) && go mod tidy -diff
	go vet ./...
	cd $(DEPLOYCHECK) && go vet ./...
	go test -count=1 -timeout 20m ./...
	cd $(DEPLOYCHECK) && go test -count=1 ./...

# docs/FLAGS.md is generated; config.TestFlagsDocCurrent fails when it is
# stale.
docs:
	go generate ./cmd/mcp-run-python/internal/config/

# test-go runs it too, as the end-to-end test TestConformance; deno fetches
# the pinned suite from the npm registry (DENO_TLS_CA_STORE above).
conformance: $(DENO)
	go test -count=1 -run '^TestConformance$$' ./cmd/mcp-run-python/

bench: build $(DENO)
	go test -run '^$$' -bench . -benchtime 1x -count 1 -timeout 20m ./cmd/mcp-run-python/
	go test -run '^$$' -bench . -count 1 ./supervisor/packages/...

# The ordering of log notifications among concurrent calls is checked with
# many more calls than make test makes.
soak: $(DENO)
	go test -count=1 -run '^TestSoak$$' -timeout 20m -v ./supervisor/ -args -soak.calls=2000
	go test -count=1 -run '^TestE2E$$/^[a-z_]*$$/^logging_order$$' -timeout 20m ./cmd/mcp-run-python/ -args -e2e.order-calls=100

# Only this machine's platform runs the tests; for the others this proves
# that everything compiles, tests included (their binaries are "run" by
# true), and that vet is content. Every platform is tried; the failures are
# listed at the end.
cross:
	@failed=; \
	for p in $(PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; \
		echo "== $$os/$$arch"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build ./... || failed="$$failed $$p:build"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go vet ./... || failed="$$failed $$p:vet"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go test -run '^$$' -exec true ./... >/dev/null || failed="$$failed $$p:test"; \
	done; \
	if [ -n "$$failed" ]; then echo "make cross failed:$$failed"; exit 1; fi

# deploycheck's TestImage, behind the build tag imagetest: it builds the
# image (base images that cannot be pulled are made by base-images) and runs
# it as the Deployment does. Its FIGURE lines are the build time, the image's
# size, the first result after `docker run`, later calls and memory at rest.
# The build arguments PYODIDE_PACKAGES, PYODIDE_INDEX_URL, NPM_CONFIG_REGISTRY
# and EXTRA_CA_CERTS are passed on from the environment; IMAGE=NAME tests an
# image built elsewhere. Without an engine nothing runs, and the output says
# so rather than "ok".
DOCKER ?= docker
export DOCKER
image-test:
	@if ! $(DOCKER) version --format '{{.Server.Version}}' >/dev/null 2>&1; then \
		echo "image-test: SKIPPED: no Docker engine answers ($(DOCKER) version); nothing was tested"; \
		exit 0; \
	fi; \
	cd $(DEPLOYCHECK) && go test -tags imagetest -run '^TestImage$$' -count=1 -timeout 30m -v .

base-images:
	deploy/image/base-images.sh

fmt:
	gofmt -w .
	$(DENO) fmt js/ deno.json testdata/tssdk/client.ts

clean:
	rm -rf bin node_modules
