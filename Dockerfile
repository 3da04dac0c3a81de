# The mcp-run-python server with Deno and a warm cache: Pyodide, the worker
# program, the memory snapshot and V8's code cache, made by `warmup` at build
# time, so that a container downloads nothing and boots no Pyodide: its first
# result comes 1.1-1.7 s after `docker run`, once a worker has restored the
# snapshot, and a later call that finds a warm worker takes about 15 ms
# (docs/DEPLOY.md, "The image"; `make image-test` measures both).
#
#   DOCKER_BUILDKIT=1 docker build -t mcp-run-python .
#   docker run --rm -p 3001:3001 mcp-run-python
#
# It needs BuildKit (FROM --platform, RUN --mount): Docker 23 and later use it
# through the buildx plugin, Docker 20.10 through DOCKER_BUILDKIT=1; the
# legacy builder fails at the first FROM. The build needs the network: Go
# modules, the golang, deno and debian images, and npm's registry, from which
# warmup downloads Pyodide through Deno's npm resolution, and Pyodide's
# package host for PYODIDE_PACKAGES. docs/DEPLOY.md says how to build without
# any of them ("An air-gapped build": the build arguments GOPROXY,
# NPM_CONFIG_REGISTRY and PYODIDE_INDEX_URL, and base images made with
# deploy/image/base-images.sh), and describes the image and the Kubernetes
# manifests in deploy/kubernetes/, which the tests of
# cmd/mcp-run-python/internal/config/deploycheck (a module of its own) check
# against this file and the program's own flag parser; `make image-test`
# builds the image and checks the running container.

# Go of go.mod, and Deno of the Makefile (DENO_VERSION): the tests check both.
ARG GO_VERSION=1.26
ARG DENO_VERSION=2.9.6

# The binary: pure Go, built for the target platform on the build platform.
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
# A module proxy of your own, for a build without the internet.
ARG GOPROXY
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS
ARG TARGETARCH
# What --version prints, as a release stamps it (.goreleaser.yaml); empty
# gives "dev".
ARG VERSION=
ARG COMMIT=
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
      -o /out/mcp-run-python ./cmd/mcp-run-python

# Deno's official image of the bare binary (/deno), for amd64 and arm64.
FROM denoland/deno:bin-${DENO_VERSION} AS deno

# Deno needs glibc (no musl build, so no Alpine). Debian slim rather than
# distroless: the pods' init container copies the warm cache with cp (see
# deploy/kubernetes/deployment.yaml).
FROM debian:bookworm-slim
# ca-certificates: the server downloads packages from PyPI and Pyodide's CDN
# over HTTPS with the system's certificates, and so does Deno
# (DENO_TLS_CA_STORE below) at build time. EXTRA_CA_CERTS, PEM text, adds
# certificates to them: an internal CA that signed a proxy or a registry the
# build or the server goes through. The user has no home and no shell; 65532
# is the usual non-root id (distroless' nonroot).
ARG EXTRA_CA_CERTS=
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && if [ -n "$EXTRA_CA_CERTS" ]; then \
         printf '%s\n' "$EXTRA_CA_CERTS" >/usr/local/share/ca-certificates/extra.crt && update-ca-certificates; \
       fi \
    && groupadd --gid 65532 nonroot \
    && useradd --no-log-init --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin nonroot \
    && mkdir -p /opt/mcp-run-python/cache \
    && chown 65532:65532 /opt/mcp-run-python/cache
COPY --from=deno /deno /usr/local/bin/deno
COPY --from=build /out/mcp-run-python /usr/local/bin/mcp-run-python
# The cache lives at the same path at build and at run time: the snapshot's
# code cache names the files it was made from, by path. At run time the root
# file system is read-only; the pods copy this directory into a writable
# volume mounted at the same path. TMPDIR holds each server's run directory
# (the workers' bridge socket and throwaway DENO_DIRs). HOME is /tmp, a
# volume too: nothing should write there, and nothing fails if something does.
ENV MCP_RUN_PYTHON_DENO=/usr/local/bin/deno \
    MCP_RUN_PYTHON_CACHE_DIR=/opt/mcp-run-python/cache \
    TMPDIR=/tmp \
    HOME=/tmp \
    DENO_NO_UPDATE_CHECK=1 \
    DENO_TLS_CA_STORE=mozilla,system
USER 65532:65532
# An npm registry of your own (Deno reads the variable), for a build without
# the internet.
ARG NPM_CONFIG_REGISTRY
# Downloads Pyodide (npm), makes the memory snapshot and runs a check call,
# as the user that runs the server, so that it owns the files.
RUN mcp-run-python warmup
# Pyodide's native packages (numpy, pandas, pyyaml, markupsafe for jinja2,
# matplotlib ...) come only from Pyodide's package host, which a server
# behind a firewall cannot reach: fetch downloads them and their
# dependencies, checked against Pyodide's lock file, into the package cache
# the server installs from. Name others with --build-arg
# PYODIDE_PACKAGES="numpy pandas matplotlib", or none with PYODIDE_PACKAGES=
# for a smaller image. PYODIDE_INDEX_URL takes them from elsewhere: the URL
# of a directory that `mcp-run-python fetch --mirror DIR PACKAGE...` filled.
ARG PYODIDE_PACKAGES="numpy pandas"
ARG PYODIDE_INDEX_URL=
RUN test -z "$PYODIDE_PACKAGES" || mcp-run-python fetch ${PYODIDE_INDEX_URL:+--pyodide-index-url "$PYODIDE_INDEX_URL"} $PYODIDE_PACKAGES
EXPOSE 3001
ENTRYPOINT ["/usr/local/bin/mcp-run-python"]
# Listen on every interface of the container; put an authenticating proxy in
# front. Each POST to /mcp stands alone, so any replica can answer it.
CMD ["--host", "0.0.0.0", "--port", "3001", "streamable-http-stateless"]
