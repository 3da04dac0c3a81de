// Package service installs the program as a service of the system's service
// manager (systemd, launchd, the Windows Service Control Manager) through
// github.com/kardianos/service, with units it renders itself (unit.go), and
// runs the program as a Windows service when the Service Control Manager
// starts it; elsewhere Run does nothing.
//
// Run is this package's own rather than kardianos/service's: that one
// neither reports progress during a long graceful stop nor notices a
// program that ends on its own, and it always reports exit code 0, so the
// restart after an exit with an error would never happen.
//
// The life cycle of the program as a service lives in this file, in terms
// of the Service Control Manager's own numbers rather than
// golang.org/x/sys/windows/svc's types, so that it compiles and is tested on
// every platform; only service_windows.go runs it.
package service

import (
	"context"
	"io"
	"time"
)

// Program is what a service runs: the program with the command line's
// arguments followed by extraArgs, on the given standard streams, until ctx
// ends. It returns the program's exit status, 0 for success. Package main
// passes its own run, so that a service is the same program as a console.
type Program func(ctx context.Context, extraArgs []string, stdin io.Reader, stdout, stderr io.Writer) int

// exitFailure is the exit status of a failure, as package main numbers it:
// Run returns it when the service could not run the program at all.
const exitFailure = 1

// Service states and control codes as the Service Control Manager numbers
// them (SERVICE_* in winsvc.h); service_windows.go checks at compile time
// that they equal svc's.
const (
	serviceStartPending uint32 = 2 // SERVICE_START_PENDING
	serviceStopPending  uint32 = 3 // SERVICE_STOP_PENDING
	serviceRunning      uint32 = 4 // SERVICE_RUNNING

	serviceControlStop        uint32 = 1 // SERVICE_CONTROL_STOP
	serviceControlInterrogate uint32 = 4 // SERVICE_CONTROL_INTERROGATE
	serviceControlShutdown    uint32 = 5 // SERVICE_CONTROL_SHUTDOWN
)

// How long the Service Control Manager should wait for the next report:
// while starting, for the program to get going; while stopping, between the
// progress reports that come every serviceProgressEvery, so that a long
// graceful shutdown is not taken for a hung one.
const (
	serviceStartWaitHint = 10 * time.Second
	serviceStopWaitHint  = 5 * time.Second
	serviceProgressEvery = time.Second
)

// serviceStatus is what the service reports to the Service Control Manager.
type serviceStatus struct {
	State uint32
	// AcceptsStop says that Stop and Shutdown requests are taken: while
	// running, not while starting or already stopping.
	AcceptsStop bool
	// CheckPoint grows with each progress report of a pending state.
	CheckPoint uint32
	WaitHint   time.Duration
}

// serviceAction is what the service does with a control request.
type serviceAction int

const (
	// serviceIgnore: a request the service did not say it accepts.
	serviceIgnore serviceAction = iota
	// serviceReport: Interrogate, answered with the current status.
	serviceReport
	// serviceStop: Stop or Shutdown, the service's only stop signals.
	serviceStop
)

// serviceActionFor translates a control request. Shutdown is a Stop with
// less time: the server's graceful shutdown is the same, and Windows ends
// the process when its own shutdown timeout runs out.
func serviceActionFor(control uint32) serviceAction {
	switch control {
	case serviceControlStop, serviceControlShutdown:
		return serviceStop
	case serviceControlInterrogate:
		return serviceReport
	}
	return serviceIgnore
}

// serviceExitCode translates the program's exit status into a service exit
// code: 0 is a normal stop; any other status becomes a service-specific
// error, which the Service Control Manager logs and, with the failure
// actions flag set (sc.exe failureflag), answers with the failure actions.
func serviceExitCode(status int) (serviceSpecific bool, code uint32) {
	if status == 0 {
		return false, 0
	}
	return true, uint32(status)
}

// runServiceBody runs program as the body of a service: it reports
// StartPending, starts program, reports Running, and on a Stop or Shutdown
// request reports StopPending and cancels program's context, which is the
// program's graceful shutdown, reporting progress every progressEvery until
// program returns. It returns program's exit status, whether program ended
// on request or on its own; the caller reports Stopped.
//
// requests are the control requests and control extracts a request's
// control code; report delivers a status and may block.
func runServiceBody[R any](requests <-chan R, control func(R) uint32, program func(context.Context) int,
	report func(serviceStatus), progressEvery time.Duration) int {
	report(serviceStatus{State: serviceStartPending, WaitHint: serviceStartWaitHint})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() { done <- program(ctx) }()
	// The program answers at once whatever it is doing (it starts its
	// workers in the background), so it is running as soon as it runs.
	current := serviceStatus{State: serviceRunning, AcceptsStop: true}
	report(current)

	var progress <-chan time.Time // ticks while stopping
	for {
		select {
		case status := <-done:
			return status
		case r := <-requests:
			switch serviceActionFor(control(r)) {
			case serviceReport:
				report(current)
			case serviceStop:
				if progress == nil {
					cancel()
					ticker := time.NewTicker(progressEvery)
					defer ticker.Stop()
					progress = ticker.C
				}
				current = stopProgress(current)
				report(current)
			}
		case <-progress:
			current = stopProgress(current)
			report(current)
		}
	}
}

// stopProgress returns the next StopPending report after s.
func stopProgress(s serviceStatus) serviceStatus {
	next := serviceStatus{State: serviceStopPending, WaitHint: serviceStopWaitHint, CheckPoint: 1}
	if s.State == serviceStopPending {
		next.CheckPoint = s.CheckPoint + 1
	}
	return next
}
