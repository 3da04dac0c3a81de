package service

import (
	"context"
	"testing"
	"time"
)

// The other exit statuses of package main (exitFailure is this package's
// own), and the bound on the tests' waits.
const (
	exitOK      = 0
	exitUsage   = 2
	testTimeout = 30 * time.Second
)

func TestServiceActionFor(t *testing.T) {
	tests := []struct {
		name    string
		control uint32
		want    serviceAction
	}{
		{"stop", serviceControlStop, serviceStop},
		{"shutdown", serviceControlShutdown, serviceStop},
		{"interrogate", serviceControlInterrogate, serviceReport},
		{"pause", 2, serviceIgnore},
		{"continue", 3, serviceIgnore},
		{"param change", 6, serviceIgnore},
		{"preshutdown", 0x0f, serviceIgnore},
		{"session change", 0x0e, serviceIgnore},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := serviceActionFor(tt.control); got != tt.want {
				t.Errorf("serviceActionFor(%d) = %d, want %d", tt.control, got, tt.want)
			}
		})
	}
}

func TestServiceExitCode(t *testing.T) {
	tests := []struct {
		status       int
		wantSpecific bool
		wantCode     uint32
	}{
		{exitOK, false, 0},
		{exitFailure, true, 1},
		{exitUsage, true, 2},
	}
	for _, tt := range tests {
		specific, code := serviceExitCode(tt.status)
		if specific != tt.wantSpecific || code != tt.wantCode {
			t.Errorf("serviceExitCode(%d) = %v, %d; want %v, %d", tt.status, specific, code, tt.wantSpecific, tt.wantCode)
		}
	}
}

// fakeControl is a control request as the tests send it.
type fakeControl struct{ code uint32 }

func TestServiceBody(t *testing.T) {
	start := serviceStatus{State: serviceStartPending, WaitHint: serviceStartWaitHint}
	running := serviceStatus{State: serviceRunning, AcceptsStop: true}
	tests := []struct {
		name     string
		controls []uint32
		// endsAlone makes the program end at once, without a request.
		endsAlone bool
		// linger is how long the program takes to stop once cancelled.
		linger time.Duration
		status int // the program's exit status
		// want are the reports up to the first StopPending; any after it
		// must be StopPending with the next checkpoint.
		want     []serviceStatus
		stopping bool // whether a StopPending must follow want
	}{
		{name: "stop", controls: []uint32{serviceControlStop}, status: exitOK,
			want: []serviceStatus{start, running}, stopping: true},
		{name: "shutdown", controls: []uint32{serviceControlShutdown}, status: exitOK,
			want: []serviceStatus{start, running}, stopping: true},
		{name: "interrogate, then stop", controls: []uint32{serviceControlInterrogate, serviceControlStop}, status: exitOK,
			want: []serviceStatus{start, running, running}, stopping: true},
		{name: "controls not accepted are ignored", controls: []uint32{2, 3, 6, 0x0f, serviceControlStop}, status: exitOK,
			want: []serviceStatus{start, running}, stopping: true},
		{name: "a slow stop reports progress", controls: []uint32{serviceControlStop, serviceControlStop},
			linger: 50 * time.Millisecond, status: exitOK, want: []serviceStatus{start, running}, stopping: true},
		{name: "a failed stop keeps its status", controls: []uint32{serviceControlStop}, status: exitFailure,
			want: []serviceStatus{start, running}, stopping: true},
		{name: "the program fails on its own", endsAlone: true, status: exitUsage,
			want: []serviceStatus{start, running}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			requests := make(chan fakeControl, len(tt.controls))
			for _, c := range tt.controls {
				requests <- fakeControl{c}
			}
			var reports []serviceStatus // report runs on the body's goroutine only
			cancelled := false
			program := func(ctx context.Context) int {
				if tt.endsAlone {
					return tt.status
				}
				select {
				case <-ctx.Done():
					cancelled = true
				case <-time.After(testTimeout):
					t.Error("the program was never cancelled")
				}
				time.Sleep(tt.linger) // a graceful shutdown taking its time
				return tt.status
			}
			got := runServiceBody(requests, func(r fakeControl) uint32 { return r.code }, program,
				func(s serviceStatus) { reports = append(reports, s) }, 5*time.Millisecond)

			if got != tt.status {
				t.Errorf("status %d, want %d", got, tt.status)
			}
			if cancelled == tt.endsAlone {
				t.Errorf("program cancelled: %v, want %v", cancelled, !tt.endsAlone)
			}
			if len(reports) < len(tt.want) {
				t.Fatalf("reports %+v, want them to start with %+v", reports, tt.want)
			}
			for i, want := range tt.want {
				if reports[i] != want {
					t.Errorf("report %d: %+v, want %+v", i, reports[i], want)
				}
			}
			rest := reports[len(tt.want):]
			if tt.stopping != (len(rest) > 0) {
				t.Fatalf("reports after %d: %+v, want StopPending: %v", len(tt.want), rest, tt.stopping)
			}
			for i, s := range rest {
				want := serviceStatus{State: serviceStopPending, CheckPoint: uint32(i + 1), WaitHint: serviceStopWaitHint}
				if s != want {
					t.Errorf("report %d: %+v, want %+v", len(tt.want)+i, s, want)
				}
			}
			if tt.linger > 0 && len(rest) < 3 {
				t.Errorf("a stop of %v reported progress %d times, want it every 5ms", tt.linger, len(rest))
			}
		})
	}
}
