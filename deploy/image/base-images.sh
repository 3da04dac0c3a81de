#!/bin/sh
# Makes the three base images the Dockerfile names, for a machine that reaches
# no image registry, from what it can reach: Debian's archive (debootstrap), a
# Go toolchain and a Deno binary already on this machine (Go's from the module
# proxy, golang.org/toolchain; Deno's from npm). docs/DEPLOY.md, "An
# air-gapped build", describes it; `make base-images` runs it, as root (for
# debootstrap), and the image test runs it when an image cannot be pulled.
#
#   debian:bookworm-slim      debootstrap --variant=minbase bookworm
#   golang:GO-bookworm        that, with `go env GOROOT` in /usr/local/go and
#                             this machine's CA certificates (go mod download)
#   denoland/deno:bin-DENO    /deno alone, as Deno's own bin- images
#
# GO is the Dockerfile's GO_VERSION, DENO the Makefile's DENO_VERSION; the
# toolchain and the binary must be those versions (checked below). Images
# that exist already are left alone: remove them to make them again.
#
# Variables: DOCKER (docker), DEBIAN_MIRROR (http://deb.debian.org/debian),
# GO (go), DENO (deno, else ~/.deno/bin/deno).
set -eu
cd "$(dirname "$0")/../.."
docker="${DOCKER:-docker}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
go="${GO:-go}"
deno="${DENO:-$(command -v deno 2>/dev/null || echo "$HOME/.deno/bin/deno")}"

go_version="$(sed -n 's/^ARG GO_VERSION=//p' Dockerfile)"
deno_version="$(sed -n 's/^DENO_VERSION *:= *//p' Makefile)"
debian_image=debian:bookworm-slim
golang_image="golang:$go_version-bookworm"
deno_image="denoland/deno:bin-$deno_version"

have() { "$docker" image inspect "$1" >/dev/null 2>&1; }

work="$(mktemp -d)"
# chmod: a toolchain from Go's module cache is read-only.
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT INT TERM

# The root file system both Debian images start from; made once, when either
# is missing.
debian_root() {
	[ -d "$work/debian" ] && return
	echo "base-images: debootstrap bookworm from $mirror" >&2
	debootstrap --variant=minbase bookworm "$work/debian" "$mirror" >"$work/debootstrap.log" 2>&1 ||
		{ cat "$work/debootstrap.log" >&2; exit 1; }
	# What Debian's own slim image leaves out too: the downloaded packages,
	# the package lists, documentation and translations; and, as its
	# configuration says, for every apt-get later (without it an apt-get
	# update in the Dockerfile keeps 90 MB of package caches).
	(cd "$work/debian" && rm -rf var/cache/apt/archives/*.deb var/cache/apt/*.bin var/lib/apt/lists/* \
		usr/share/doc/* usr/share/man/* usr/share/info/* usr/share/locale/*)
	cat >"$work/debian/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
	cat >"$work/debian/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
EOF
}

if ! have "$debian_image"; then
	debian_root
	tar -C "$work/debian" -c . | "$docker" import \
		--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		--change 'CMD ["bash"]' - "$debian_image"
fi

if ! have "$golang_image"; then
	goroot="$("$go" env GOROOT)"
	have_go="$("$go" env GOVERSION)"
	case "$have_go" in
	"go$go_version" | "go$go_version".*) ;;
	*) echo "base-images: $go is $have_go, the Dockerfile wants Go $go_version" >&2; exit 1 ;;
	esac
	debian_root
	cp -a "$work/debian" "$work/golang"
	cp -a "$goroot" "$work/golang/usr/local/go"
	mkdir -p "$work/golang/etc/ssl/certs" "$work/golang/go"
	cp /etc/ssl/certs/ca-certificates.crt "$work/golang/etc/ssl/certs/"
	# GOTOOLCHAIN=local, as the official image: the build uses this Go.
	tar -C "$work/golang" -c . | "$docker" import \
		--change 'ENV PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		--change 'ENV GOPATH=/go' --change 'ENV GOTOOLCHAIN=local' \
		--change 'WORKDIR /go' - "$golang_image"
fi

if ! have "$deno_image"; then
	case "$("$deno" --version | head -1)" in
	"deno $deno_version "*) ;;
	*) echo "base-images: $deno is not Deno $deno_version" >&2; exit 1 ;;
	esac
	mkdir "$work/deno"
	cp "$(readlink -f "$deno" 2>/dev/null || echo "$deno")" "$work/deno/deno"
	chmod 755 "$work/deno/deno"
	tar -C "$work/deno" -c deno | "$docker" import --change 'ENTRYPOINT ["/deno"]' - "$deno_image"
fi

for image in "$debian_image" "$golang_image" "$deno_image"; do
	echo "base-images: $image $("$docker" image inspect --format '{{.Size}}' "$image") bytes"
done
