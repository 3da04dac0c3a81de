// Package deploycheck checks the container image (Dockerfile) and the
// Kubernetes manifests (deploy/kubernetes/) against the program: what they
// pass it goes through its own flag parser (package config), and the ports,
// probes, volumes, memory and users they declare must agree with what that
// gives. It is a module of its own, with only tests, so that the Kubernetes
// API types and BuildKit's Dockerfile parser it needs are not requirements
// of the program's module, which every `go install` downloads; it may still
// import the program's internal packages, since Go's internal rule goes by
// import path. `make test` runs it.
package deploycheck
