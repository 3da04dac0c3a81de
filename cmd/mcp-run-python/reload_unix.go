//go:build unix

package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// onReload calls fn on every SIGHUP until ctx ends, as daemons re-read
// their files.
func onReload(ctx context.Context, fn func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				fn()
			}
		}
	}()
}
