package install

import "testing"

// A timeout's text names the phase by its String: the words users see.
func TestInstallPhaseString(t *testing.T) {
	tests := []struct {
		phase Phase
		want  string
	}{
		{PhaseNone, ""},
		{PhaseFetch, "resolving and downloading packages"},
		{PhaseImports, "finding the code's imports"},
		{PhaseInstall, "installing packages"},
		{Phase(9), "Phase(9)"},
	}
	for _, tt := range tests {
		if got := tt.phase.String(); got != tt.want {
			t.Errorf("Phase(%d).String() = %q, want %q", int(tt.phase), got, tt.want)
		}
	}
}
