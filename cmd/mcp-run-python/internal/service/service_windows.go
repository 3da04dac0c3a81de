//go:build windows

package service

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/windows/svc"
)

// defaultServiceName names the log file when the Service Control Manager
// does not pass the service's name, which it always does.
const defaultServiceName = "mcp-run-python"

// Run runs program as a Windows service when the Service Control Manager
// started this process, and reports ok; otherwise it does
// nothing and the caller runs the program as a console program.
//
// As a service the program stops on the Service Control Manager's Stop and
// Shutdown requests, never on signals: Windows sends its logoff event to
// services too, and Go delivers that as SIGTERM, so a service that stopped
// on SIGTERM would stop whenever any user logged off. Without a handler for
// them the console events go to Windows' default handling, which leaves a
// service running.
func Run(program Program) (status int, ok bool) {
	// service.go's numbers must be the Service Control Manager's: were any
	// comparison false, the map would have the key false twice, which does
	// not compile.
	_ = map[bool]int{false: 0, serviceStartPending == uint32(svc.StartPending) &&
		serviceStopPending == uint32(svc.StopPending) && serviceRunning == uint32(svc.Running) &&
		serviceControlStop == uint32(svc.Stop) && serviceControlInterrogate == uint32(svc.Interrogate) &&
		serviceControlShutdown == uint32(svc.Shutdown): 1}

	isService, err := svc.IsWindowsService()
	if err != nil || !isService {
		// When the check itself fails this is almost surely a console: a
		// service that ends up here never reports its start, and the
		// Service Control Manager says so in the event log.
		return 0, false
	}
	h := &serviceHandler{program: program, status: make(chan int, 1)}
	// The name is ignored for a service that has its process to itself.
	if err := svc.Run(defaultServiceName, h); err != nil {
		// No console to tell; the Service Control Manager logs the start
		// that never reported.
		return exitFailure, true
	}
	select {
	case status = <-h.status:
	default: // Execute never ran
		status = exitFailure
	}
	return status, true
}

// serviceHandler is the service: svc.Run calls Execute.
type serviceHandler struct {
	program Program
	status  chan int // the program's exit status, for after svc.Run returns
}

// Execute implements svc.Handler: it runs the program as the service's
// body until it ends, on a Stop or Shutdown request or on its own.
func (h *serviceHandler) Execute(args []string, requests <-chan svc.ChangeRequest, changes chan<- svc.Status) (bool, uint32) {
	name := defaultServiceName
	if len(args) > 0 {
		if args[0] != "" {
			name = args[0]
		}
		args = args[1:]
	}
	logFile, closeLog := openServiceLog(name)
	defer closeLog()
	// A service has no console: nothing to read, and its output goes to
	// the log file. Arguments given to the start request (sc.exe start NAME
	// ARGS...) follow those of the service's command line.
	status := runServiceBody(requests,
		func(r svc.ChangeRequest) uint32 { return uint32(r.Cmd) },
		func(ctx context.Context) int {
			return h.program(ctx, slices.Clone(args), strings.NewReader(""), logFile, logFile)
		},
		func(s serviceStatus) { changes <- toSvcStatus(s) },
		serviceProgressEvery)
	h.status <- status
	if status != 0 {
		fmt.Fprintf(logFile, "mcp-run-python: service %s stops with status %d\n", name, status)
	}
	return serviceExitCode(status)
}

// toSvcStatus converts a status of the service's life cycle into svc's.
func toSvcStatus(s serviceStatus) svc.Status {
	out := svc.Status{
		State:      svc.State(s.State),
		CheckPoint: s.CheckPoint,
		WaitHint:   uint32(s.WaitHint / time.Millisecond),
	}
	if s.AcceptsStop {
		out.Accepts = svc.AcceptStop | svc.AcceptShutdown
	}
	return out
}

// openServiceLog opens %ProgramData%\mcp-run-python\NAME.log for appending,
// where the service writes what a console program writes to stderr. Without
// it the service writes nowhere rather than not start.
func openServiceLog(name string) (io.Writer, func()) {
	base := os.Getenv("ProgramData")
	if base == "" {
		// A relative path would land in the service's working directory,
		// System32.
		return io.Discard, func() {}
	}
	dir := filepath.Join(base, "mcp-run-python")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return io.Discard, func() {}
	}
	f, err := os.OpenFile(filepath.Join(dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return io.Discard, func() {}
	}
	return f, func() { _ = f.Close() }
}
