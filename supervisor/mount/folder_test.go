package mount

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPin replaces the folder a mount was pinned to, as someone with the
// host's file system might between two calls: Read and Apply refuse the
// folder the path then leads to, and go on once the pinned one is back.
func TestPin(t *testing.T) {
	tests := []struct {
		name    string
		replace func(t *testing.T, host, moved, outside string) // host has been moved to moved
		err     string
	}{
		{"a symlink to another folder", func(t *testing.T, host, _, outside string) {
			symlink(t, outside, host)
		}, "not the one the server was started with"},
		{"a symlink to the folder itself", func(t *testing.T, host, moved, _ string) {
			// The same folder by another way: still the one pinned.
			symlink(t, moved, host)
		}, ""},
		{"a new folder", func(t *testing.T, host, _, _ string) {
			mkdir(t, host)
			writeTree(t, host, map[string]string{"a": "new"})
		}, "not the one the server was started with"},
		{"nothing", func(*testing.T, string, string, string) {}, "cannot be opened"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host, outside := folders(t, map[string]string{"a": "a"}, nil)
			f := Pin(Mount{Host: host, Sandbox: "/data", Writable: true})
			moved := host + ".moved"
			if err := os.Rename(host, moved); err != nil {
				t.Fatal(err)
			}
			tt.replace(t, host, moved, outside)
			files, _, readErr := f.Read(context.Background(), Limits{})
			applyErr := f.Apply(context.Background(), []Change{put("secret", "pwned"), put("b", "b")}, Limits{})
			if tt.err == "" {
				if readErr != nil || applyErr != nil {
					t.Fatalf("read: %v, apply: %v", readErr, applyErr)
				}
				if len(files) != 1 || string(files[0].Data) != "a" {
					t.Errorf("read %v, want the pinned folder's file", files)
				}
			} else {
				for _, err := range []error{readErr, applyErr} {
					errorSays(t, err, tt.err, "mount at /data")
					if strings.Contains(err.Error(), host) {
						t.Errorf("error %q shows the host folder to the caller", err)
					}
				}
				if got := tree(t, outside); !maps.Equal(got, map[string]string{"secret": "secret"}) {
					t.Errorf("the folder the path now leads to: %v", got)
				}
			}
			// The pinned folder back at its path: it is read again.
			if err := os.RemoveAll(host); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(moved, host); err != nil {
				t.Fatal(err)
			}
			if files, _, err := f.Read(context.Background(), Limits{}); err != nil || len(files) == 0 {
				t.Errorf("the pinned folder back: read %d files, %v", len(files), err)
			}
		})
	}
}

// TestPinNothing pins a folder that is not there: every use says so.
func TestPinNothing(t *testing.T) {
	f := Pin(Mount{Host: filepath.Join(t.TempDir(), "missing"), Sandbox: "/data", Writable: true})
	_, _, err := f.Read(context.Background(), Limits{})
	errorSays(t, err, "mount at /data", "cannot be opened")
	errorSays(t, f.Apply(context.Background(), []Change{put("a", "a")}, Limits{}), "mount at /data", "cannot be opened", "nothing was written")
}
