package service

import (
	"encoding/xml"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestRender renders the unit of each service manager and compares it
// byte for byte with its golden file (go test -update rewrites them).
func TestRender(t *testing.T) {
	unixArgs := []string{"streamable_http", "--port", "3002", "--workers", "4", "--deno", "/usr/local/bin/deno"}
	tests := []struct {
		name     string
		spec     Spec
		wantName string
		wantPath string
	}{
		{
			name: "systemd-system",
			spec: Spec{Manager: Systemd, Executable: "/usr/local/bin/mcp-run-python", Args: unixArgs,
				WarmupArgs: []string{"warmup", "--deno", "/usr/local/bin/deno"}, Home: "/root"},
			wantName: "mcp-run-python", wantPath: "/etc/systemd/system/mcp-run-python.service",
		},
		{
			name: "systemd-user",
			spec: Spec{Manager: Systemd, User: true, Executable: "/home/ann/bin/mcp-run-python",
				Args:       []string{"streamable_http", "--cache-dir", "/home/ann/mrp cache", "--deno", "/home/ann/.deno/bin/deno"},
				WarmupArgs: []string{"warmup", "--deno", "/home/ann/.deno/bin/deno", "--cache-dir", "/home/ann/mrp cache"},
				CacheDir:   "/home/ann/mrp cache", Home: "/home/ann"},
			wantName: "mcp-run-python", wantPath: "/home/ann/.config/systemd/user/mcp-run-python.service",
		},
		{
			name: "launchd-daemon",
			spec: Spec{Manager: Launchd, Executable: "/usr/local/bin/mcp-run-python", Args: unixArgs,
				WarmupArgs: []string{"warmup"}, Home: "/Users/ann"},
			wantName: "io.github.mcp-run-python", wantPath: "/Library/LaunchDaemons/io.github.mcp-run-python.plist",
		},
		{
			name: "launchd-agent",
			spec: Spec{Manager: Launchd, User: true, Executable: "/Users/ann/bin/mcp-run-python",
				Args: []string{"sse", "--public-url", "https://a.example/?x=1&y=<2>", "--deno", "/opt/homebrew/bin/deno"},
				Home: "/Users/ann"},
			wantName: "io.github.mcp-run-python", wantPath: "/Users/ann/Library/LaunchAgents/io.github.mcp-run-python.plist",
		},
		{
			name: "windows",
			spec: Spec{Manager: Windows, Executable: `C:\Program Files\mcp-run-python\mcp-run-python.exe`,
				Args: []string{"streamable_http", "--deno", `C:\Users\Ann Lee\.deno\bin\deno.exe`, "--allow-net", ""},
				Home: `C:\Users\Ann Lee`},
			wantName: "mcp-run-python",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := Render(tt.spec)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if u.Name != tt.wantName || u.Path != tt.wantPath {
				t.Errorf("Render: name %q, path %q; want %q, %q", u.Name, u.Path, tt.wantName, tt.wantPath)
			}
			golden := filepath.Join("testdata", tt.name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(u.Text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test -update writes it)", err)
			}
			if u.Text != string(want) {
				t.Errorf("Render(%s) differs from %s:\n%s", tt.name, golden, u.Text)
			}
		})
	}
}

// TestRenderKeepsHardening checks that every hardening line of
// deploy/mcp-run-python.service is in the system unit, and in the user unit
// but for the two that a user's service manager cannot honour as written.
func TestRenderKeepsHardening(t *testing.T) {
	deployed, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "deploy", "mcp-run-python.service"))
	if err != nil {
		t.Fatal(err)
	}
	_, hardening, ok := strings.Cut(string(deployed), "# Hardening:")
	if !ok {
		t.Fatal("no hardening section in deploy/mcp-run-python.service")
	}
	hardening, _, _ = strings.Cut(hardening, "[Install]")
	for _, user := range []bool{false, true} {
		u, err := Render(Spec{Manager: Systemd, User: user, Executable: "/x", Home: "/home/a"})
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(hardening), "\n")[1:] // the comment's rest
		lines = append(lines, "DynamicUser=yes")
		for _, line := range lines {
			want := line
			switch {
			case user && line == "DynamicUser=yes":
				continue // a user manager runs units as its user
			case user && line == "ProtectHome=yes":
				want = "ProtectHome=read-only" // the user's deno and cache are there
			}
			if !strings.Contains(u.Text, "\n"+want+"\n") {
				t.Errorf("user %v: unit lacks %q", user, want)
			}
		}
	}
}

func TestRenderRefuses(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		want string
	}{
		{"a user service on Windows", Spec{Manager: Windows, User: true, Executable: `C:\m.exe`}, "no user services"},
		{"a template action", Spec{Manager: Systemd, Executable: "/m", Args: []string{"--public-url", "https://{{x}}"}}, "template"},
		{"an unknown manager", Spec{Manager: "upstart", Executable: "/m"}, "unknown service manager"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Render(tt.spec); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Render: %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

func TestSystemdCommand(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"sse"}, "/bin/m sse"},
		{[]string{"--public-url", "http://h/100%"}, "/bin/m --public-url http://h/100%%"},
		{[]string{"--x", "$HOME"}, "/bin/m --x $$HOME"},
		{[]string{"--dir", "/a b"}, `/bin/m --dir "/a b"`},
		{[]string{"--q", `say "hi"\`}, `/bin/m --q "say \"hi\"\\"`},
		{[]string{"--allow-net", ""}, `/bin/m --allow-net ""`},
		{[]string{"a;b"}, `/bin/m "a;b"`},
	}
	for _, tt := range tests {
		if got := systemdCommand("/bin/m", tt.args); got != tt.want {
			t.Errorf("systemdCommand(%q) = %s, want %s", tt.args, got, tt.want)
		}
	}
}

// TestWindowsCommandLine checks the quoting against the rules of
// syscall.EscapeArg, which is Windows-only.
func TestWindowsCommandLine(t *testing.T) {
	tests := []struct {
		arg  string
		want string
	}{
		{"", `""`},
		{"plain", "plain"},
		{`C:\Program Files\m.exe`, `"C:\Program Files\m.exe"`},
		{`C:\dir\`, `C:\dir\`},
		{`C:\my dir\`, `"C:\my dir\\"`},
		{`a"b`, `a\"b`},
		{`a\"b`, `a\\\"b`},
		{"tab\there", "\"tab\there\""},
	}
	for _, tt := range tests {
		if got := windowsEscapeArg(tt.arg); got != tt.want {
			t.Errorf("windowsEscapeArg(%q) = %s, want %s", tt.arg, got, tt.want)
		}
	}
	if got, want := WindowsCommandLine(`C:\m.exe`, []string{"sse", "--x", "a b"}), `C:\m.exe sse --x "a b"`; got != want {
		t.Errorf("WindowsCommandLine = %s, want %s", got, want)
	}
}

// TestSystemdVerifies has systemd-analyze, where it is installed, check
// the units that Render makes: every setting known and valid, every
// command's program there.
func TestSystemdVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("no systemd-analyze here")
	}
	exe, err := os.Executable() // a program that exists, for ExecStart
	if err != nil {
		t.Fatal(err)
	}
	for _, user := range []bool{false, true} {
		dir := t.TempDir()
		cache := filepath.Join(dir, "my cache %h $HOME")
		u, err := Render(Spec{Manager: Systemd, User: user, Executable: exe,
			Args:       []string{"streamable_http", "--cache-dir", cache, "--deno", exe},
			WarmupArgs: []string{"warmup", "--deno", exe, "--cache-dir", cache}, CacheDir: cache, Home: dir})
		if err != nil {
			t.Fatal(err)
		}
		unit := filepath.Join(dir, "mcp-run-python.service")
		if err := os.WriteFile(unit, []byte(u.Text), 0o644); err != nil {
			t.Fatal(err)
		}
		args := []string{"verify", unit}
		cmd := exec.Command(analyze, args...)
		if user {
			// A user manager needs its runtime directory.
			cmd = exec.Command(analyze, append([]string{"--user"}, args...)...)
			cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+dir)
		}
		out, err := cmd.CombinedOutput()
		// verify exits 0 even for settings it ignores: its output says.
		if err != nil || len(out) > 0 {
			t.Errorf("user %v: systemd-analyze verify: %v\n%s\n%s", user, err, out, u.Text)
		}
	}
}

// TestLaunchdPlistArguments reads the plist back as XML: ProgramArguments
// must be the program and its arguments, whatever characters they hold.
func TestLaunchdPlistArguments(t *testing.T) {
	args := []string{"sse", "--public-url", `https://a.example/?x=1&y=<2>"'`, "--deno", "/opt/deno dir/deno"}
	u, err := Render(Spec{Manager: Launchd, User: true, Executable: "/Applications/m & n/mcp-run-python", Args: args, Home: "/Users/a&b"})
	if err != nil {
		t.Fatal(err)
	}
	var plist struct {
		Dict struct {
			Items []struct {
				XMLName xml.Name
				Strings []string `xml:"string"`
				Text    string   `xml:",chardata"`
			} `xml:",any"`
		} `xml:"dict"`
	}
	if err := xml.Unmarshal([]byte(u.Text), &plist); err != nil {
		t.Fatalf("the plist is not XML: %v\n%s", err, u.Text)
	}
	var got []string
	var logs []string
	for i, item := range plist.Dict.Items {
		if item.XMLName.Local != "key" || i+1 == len(plist.Dict.Items) {
			continue
		}
		switch next := plist.Dict.Items[i+1]; item.Text {
		case "ProgramArguments":
			got = next.Strings
		case "StandardOutPath", "StandardErrorPath":
			logs = append(logs, next.Text)
		}
	}
	want := append([]string{"/Applications/m & n/mcp-run-python"}, args...)
	if !slices.Equal(got, want) {
		t.Errorf("ProgramArguments %q, want %q", got, want)
	}
	if wantLog := "/Users/a&b/Library/Logs/mcp-run-python.log"; !slices.Equal(logs, []string{wantLog, wantLog}) {
		t.Errorf("logs %q, want %s twice", logs, wantLog)
	}
}

// TestControlOtherSystem checks that Control refuses another system's
// service manager before it touches this one's.
func TestControlOtherSystem(t *testing.T) {
	here, _ := ManagerFor(runtime.GOOS)
	for _, m := range []Manager{Systemd, Launchd, Windows} {
		if m == here {
			continue
		}
		var out strings.Builder
		err := Control(Spec{Manager: m, Executable: "/m"}, ActionInstall, &out)
		if err == nil || !strings.Contains(err.Error(), "this system has no "+string(m)) || out.Len() > 0 {
			t.Errorf("Control(%s): %v, printed %q; want a refusal", m, err, out.String())
		}
	}
}
