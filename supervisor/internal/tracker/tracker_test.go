package tracker

import (
	"testing"
	"testing/synctest"
)

// TestTracker: calls are admitted until Close begins; what they start
// still runs and is waited for; once nothing runs, nothing more starts.
func TestTracker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tr Tracker
		if !tr.Enter() {
			t.Fatal("a call before shut was refused")
		}
		release := make(chan struct{})
		started := make(chan bool, 1)
		tr.Go(func() {
			<-release
			// From a counted goroutine, after shut: a kill, a reap.
			started <- tr.Go(func() {})
		})
		idle := tr.Shut()
		if tr.Enter() {
			t.Error("a call after shut was admitted")
		}
		tr.Leave()
		synctest.Wait()
		select {
		case <-idle:
			t.Fatal("idle while a goroutine runs")
		default:
		}
		close(release)
		if !<-started {
			t.Error("a counted goroutine could not start one after shut")
		}
		synctest.Wait()
		select {
		case <-idle:
		default:
			t.Fatal("not idle once everything ended")
		}
		if tr.Go(func() { t.Error("ran after idle") }) {
			t.Error("a goroutine started once shut and idle")
		}
		if tr.Shut() != idle {
			t.Error("a second shut gives another channel")
		}
	})
}
