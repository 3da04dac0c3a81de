package service

import (
	"fmt"
	"io"
	"runtime"
	"strconv"

	kservice "github.com/kardianos/service"
)

// Actions of Control.
const (
	ActionInstall   = "install"
	ActionUninstall = "uninstall"
	ActionStart     = "start"
	ActionStop      = "stop"
	ActionStatus    = "status"
)

// idle is the kservice.Interface of a service that this process only
// installs or controls: the installed service runs the program itself, as
// package main runs it, never through kservice's Run.
type idle struct{}

func (idle) Start(kservice.Service) error { return nil }
func (idle) Stop(kservice.Service) error  { return nil }

// Control performs action on the service of spec through the system's
// service manager (github.com/kardianos/service), and writes what it did to
// out. Install writes the unit that Render returns for spec and enables
// the service without starting it; the other actions need only
// spec.Manager and spec.User.
func Control(spec Spec, action string, out io.Writer) error {
	want, ok := ManagerFor(runtime.GOOS)
	if !ok || want != spec.Manager {
		return fmt.Errorf("this system has no %s", spec.Manager)
	}
	// On Linux kservice picks the init system it finds; only systemd's
	// unit keeps the hardening.
	if p := kservice.Platform(); runtime.GOOS == "linux" && p != "linux-systemd" {
		return fmt.Errorf("the service manager here is %q; only systemd is supported on Linux", p)
	}
	unit, err := Render(spec)
	if err != nil {
		return err
	}
	cfg := &kservice.Config{
		Name:        unit.Name,
		DisplayName: displayName,
		Description: description,
		Executable:  spec.Executable,
		Arguments:   spec.Args,
		Option: kservice.KeyValue{
			"UserService": spec.User,
			// Already rendered, so kservice's template engine has nothing
			// to expand (Render refuses "{{"): the file is unit.Text.
			"SystemdScript": unit.Text,
			"LaunchdConfig": unit.Text,
			// Windows: what windowsRegistration describes.
			"StartType":              "automatic",
			"OnFailure":              "restart",
			"OnFailureDelayDuration": windowsRestartDelay.String(),
			"OnFailureResetPeriod":   int(windowsResetPeriod.Seconds()),
		},
	}
	s, err := kservice.New(idle{}, cfg)
	if err != nil {
		return fmt.Errorf("service manager: %w", err)
	}
	where := unit.Name
	if unit.Path != "" {
		where = unit.Path
	}
	switch action {
	case ActionInstall:
		if err := s.Install(); err != nil {
			return fmt.Errorf("install %s: %w", where, err)
		}
		if err := afterInstall(unit.Name); err != nil {
			return fmt.Errorf("install %s: %w", where, err)
		}
		fmt.Fprintf(out, "installed %s; start it with `mcp-run-python service start%s`\n", where, userFlag(spec.User))
	case ActionUninstall:
		// Uninstall leaves a running service running on some systems.
		_ = s.Stop()
		if err := s.Uninstall(); err != nil {
			return fmt.Errorf("uninstall %s: %w", where, err)
		}
		fmt.Fprintf(out, "uninstalled %s\n", where)
	case ActionStart:
		if err := s.Start(); err != nil {
			return fmt.Errorf("start %s: %w", unit.Name, err)
		}
		fmt.Fprintf(out, "started %s\n", unit.Name)
	case ActionStop:
		if err := s.Stop(); err != nil {
			return fmt.Errorf("stop %s: %w", unit.Name, err)
		}
		fmt.Fprintf(out, "stopped %s\n", unit.Name)
	case ActionStatus:
		status, err := s.Status()
		if err != nil {
			// Not installed, too: an error, as systemctl is-active's.
			return fmt.Errorf("status of %s: %w", unit.Name, err)
		}
		fmt.Fprintf(out, "%s: %s\n", unit.Name, statusText(status))
	default:
		return fmt.Errorf("unknown action %q", action)
	}
	return nil
}

// statusText names a kservice status.
func statusText(s kservice.Status) string {
	switch s {
	case kservice.StatusRunning:
		return "running"
	case kservice.StatusStopped:
		return "stopped"
	}
	return "unknown (status " + strconv.Itoa(int(s)) + ")"
}

// userFlag is the --user of a hint, for a user service.
func userFlag(user bool) string {
	if user {
		return " --user"
	}
	return ""
}
