//go:build windows

package service

import (
	"testing"
	"time"

	"golang.org/x/sys/windows/svc"
)

func TestToSvcStatus(t *testing.T) {
	tests := []struct {
		in   serviceStatus
		want svc.Status
	}{
		{serviceStatus{State: serviceStartPending, WaitHint: 10 * time.Second},
			svc.Status{State: svc.StartPending, WaitHint: 10000}},
		{serviceStatus{State: serviceRunning, AcceptsStop: true},
			svc.Status{State: svc.Running, Accepts: svc.AcceptStop | svc.AcceptShutdown}},
		{serviceStatus{State: serviceStopPending, CheckPoint: 3, WaitHint: 5 * time.Second},
			svc.Status{State: svc.StopPending, CheckPoint: 3, WaitHint: 5000}},
	}
	for _, tt := range tests {
		if got := toSvcStatus(tt.in); got != tt.want {
			t.Errorf("toSvcStatus(%+v) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}
