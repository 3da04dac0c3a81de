//go:build windows

package service

import (
	"fmt"

	"golang.org/x/sys/windows/svc/mgr"
)

// afterInstall completes an installation: kservice sets the restart on a
// crash, and this sets the failure actions flag, so that an exit with an
// error restarts the service as well (sc.exe failureflag NAME 1).
func afterInstall(name string) error {
	m, err := mgr.Connect()
	if err != nil {
		return fmt.Errorf("connect to the Service Control Manager: %w", err)
	}
	defer m.Disconnect()
	s, err := m.OpenService(name)
	if err != nil {
		return fmt.Errorf("open service %s: %w", name, err)
	}
	defer s.Close()
	if err := s.SetRecoveryActionsOnNonCrashFailures(true); err != nil {
		return fmt.Errorf("set the failure actions flag of %s: %w", name, err)
	}
	return nil
}
