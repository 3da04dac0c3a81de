//go:build !unix

package main

import "context"

// onReload does nothing where there is no SIGHUP (Windows): a restart of
// the service reads the files again.
func onReload(context.Context, func()) {}
