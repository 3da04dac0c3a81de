package mount

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// folders makes a host folder to mount, with files and then what setup
// (if any) makes, and beside it one that holds a secret the sandbox must
// never see or change.
func folders(t *testing.T, files map[string]string, setup func(t *testing.T, host, outside string)) (host, outside string) {
	t.Helper()
	base := t.TempDir()
	host, outside = filepath.Join(base, "host"), filepath.Join(base, "outside")
	writeTree(t, outside, map[string]string{"secret": "secret"})
	mkdir(t, host)
	writeTree(t, host, files)
	if setup != nil {
		setup(t, host, outside)
	}
	return host, outside
}

func TestRead(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		setup   func(t *testing.T, host, outside string)
		lim     Limits
		want    map[string]string
		skipped []string
		err     []string // what the error says, nil for none
	}{{
		name:  "nested folders",
		files: map[string]string{"a.txt": "a", "sub/b.txt": "bb", "sub/deep/c.txt": "ccc", "empty": ""},
		setup: func(t *testing.T, host, _ string) { mkdir(t, filepath.Join(host, "no", "files")) },
		want:  map[string]string{"a.txt": "a", "sub/b.txt": "bb", "sub/deep/c.txt": "ccc", "empty": ""},
	}, {
		name: "an empty folder",
		want: map[string]string{},
	}, {
		name:  "at the limits",
		files: map[string]string{"a": "ab", "b/c": "c"},
		lim:   Limits{MaxBytes: 3, MaxFiles: 2},
		want:  map[string]string{"a": "ab", "b/c": "c"},
	}, {
		name:  "too many files",
		files: map[string]string{"a": "", "b": "", "c/d": ""},
		lim:   Limits{MaxFiles: 2},
		err:   []string{"more than 2 files", "--mount-files", "mount a smaller folder"},
	}, {
		name:  "too many bytes",
		files: map[string]string{"a": "ab", "b": "cd"},
		lim:   Limits{MaxBytes: 3, MaxFiles: 10},
		err:   []string{"more than 3 B", "--mount-limit", "mount a smaller folder"},
	}, {
		name:  "one file too big",
		files: map[string]string{"big": strings.Repeat("x", 1<<20)},
		lim:   Limits{MaxBytes: 1 << 10},
		err:   []string{"more than 1.0 KiB", "--mount-limit"},
	}, {
		name:  "symlinks inside are followed",
		files: map[string]string{"real.txt": "real"},
		setup: func(t *testing.T, host, _ string) {
			symlink(t, "real.txt", filepath.Join(host, "link.txt"))
			mkdir(t, filepath.Join(host, "sub"))
			symlink(t, filepath.Join("..", "real.txt"), filepath.Join(host, "sub", "up.txt"))
		},
		want: map[string]string{"real.txt": "real", "link.txt": "real", "sub/up.txt": "real"},
	}, {
		name:  "a symlink out is skipped",
		files: map[string]string{"a": "a"},
		setup: func(t *testing.T, host, _ string) {
			symlink(t, filepath.Join("..", "outside", "secret"), filepath.Join(host, "link"))
		},
		want:    map[string]string{"a": "a"},
		skipped: []string{"link"},
	}, {
		name: "an absolute symlink out is skipped",
		setup: func(t *testing.T, host, outside string) {
			symlink(t, filepath.Join(outside, "secret"), filepath.Join(host, "link"))
		},
		want:    map[string]string{},
		skipped: []string{"link"},
	}, {
		name:  "an absolute symlink in is skipped",
		files: map[string]string{"a": "a"},
		setup: func(t *testing.T, host, _ string) {
			symlink(t, filepath.Join(host, "a"), filepath.Join(host, "link"))
		},
		want:    map[string]string{"a": "a"},
		skipped: []string{"link"},
	}, {
		name: "a folder symlink out is skipped",
		setup: func(t *testing.T, host, _ string) {
			symlink(t, filepath.Join("..", "outside"), filepath.Join(host, "dir"))
		},
		want:    map[string]string{},
		skipped: []string{"dir"},
	}, {
		name:  "folder symlinks inside are skipped",
		files: map[string]string{"sub/a": "a"},
		setup: func(t *testing.T, host, _ string) {
			symlink(t, ".", filepath.Join(host, "loop"))
			symlink(t, "sub", filepath.Join(host, "again"))
		},
		want:    map[string]string{"sub/a": "a"},
		skipped: []string{"again", "loop"},
	}, {
		name:  "a broken symlink is skipped",
		files: map[string]string{"a": "a"},
		setup: func(t *testing.T, host, _ string) {
			symlink(t, "gone", filepath.Join(host, "link"))
		},
		want:    map[string]string{"a": "a"},
		skipped: []string{"link"},
	}, {
		name:  "a fifo is skipped",
		files: map[string]string{"a": "a"},
		setup: func(t *testing.T, host, _ string) {
			mkfifo(t, filepath.Join(host, "fifo"))
		},
		want:    map[string]string{"a": "a"},
		skipped: []string{"fifo"},
	}, {
		name:  "a name that could not be written back is skipped",
		files: map[string]string{"a": "a"},
		setup: func(t *testing.T, host, _ string) {
			if runtime.GOOS == "windows" {
				t.Skip("no backslash in a Windows name")
			}
			writeTree(t, host, map[string]string{`back\slash`: "b"})
		},
		want:    map[string]string{"a": "a"},
		skipped: []string{`back\slash`},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host, _ := folders(t, tt.files, tt.setup)
			m := Mount{Host: host, Sandbox: "/data"}
			files, skipped, err := Pin(m).Read(context.Background(), tt.lim)
			if tt.err != nil {
				errorSays(t, err, append(tt.err, "mount at "+m.Sandbox)...)
				if strings.Contains(err.Error(), m.Host) {
					t.Errorf("error %q shows the host folder to the caller", err)
				}
				if files != nil || skipped != nil {
					t.Errorf("got %d files and %d skipped with the error, want none", len(files), len(skipped))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, f := range files {
				got[f.Path] = string(f.Data)
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("read %v, want %v", got, tt.want)
			}
			var gotSkipped []string
			for _, s := range skipped {
				t.Logf("skipped %s: %s", s.Path, s.Reason)
				if s.Reason == "" {
					t.Errorf("%s skipped without a reason", s.Path)
				}
				gotSkipped = append(gotSkipped, s.Path)
			}
			slices.Sort(gotSkipped)
			if !slices.Equal(gotSkipped, tt.skipped) {
				t.Errorf("skipped %v, want %v", gotSkipped, tt.skipped)
			}
		})
	}
}

func TestReadStopsWhenCancelled(t *testing.T) {
	host, _ := folders(t, map[string]string{"a": "a"}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := Pin(Mount{Host: host, Sandbox: "/data"}).Read(ctx, Limits{}); err == nil {
		t.Error("read a folder with a cancelled context")
	}
}

// TestOpenRegularNeverBlocks opens a FIFO as Read opens a file that was
// swapped for one after the folder was listed: at once, and saying what
// it is, rather than waiting for a writer that never comes.
func TestOpenRegularNeverBlocks(t *testing.T) {
	host, _ := folders(t, nil, nil)
	fifo := filepath.Join(host, "fifo")
	mkfifo(t, fifo)
	root, err := os.OpenRoot(host)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	tests := []struct {
		name string
		open func() error
		want func(error) bool
	}{
		{"as a file", func() error {
			f, _, err := openRegular(root, "fifo")
			if f != nil {
				f.Close()
			}
			return err
		}, func(err error) bool { return errors.Is(err, errNotRegular) }},
		// A folder swapped for a FIFO once its parent was listed.
		{"as a folder", func() error {
			_, err := walkFS{root.FS(), root}.ReadDir("fifo")
			return err
		}, func(err error) bool { return err != nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() { done <- tt.open() }()
			select {
			case err := <-done:
				if !tt.want(err) {
					t.Errorf("opening a FIFO: %v", err)
				}
			case <-time.After(10 * time.Second):
				unblockFIFO(fifo)
				t.Fatal("opening a FIFO blocked")
			}
		})
	}
}

// TestReadFIFOSwappedIn swaps FIFOs in for the folder's files while Read
// reads it, until one is swapped in between the listing and the open:
// Read leaves it out rather than waiting on it for ever.
func TestReadFIFOSwappedIn(t *testing.T) {
	const files, rounds = 200, 50
	base := t.TempDir()
	for round := range rounds {
		host, fifos := filepath.Join(base, fmt.Sprint(round)), filepath.Join(base, fmt.Sprint(round, "-fifos"))
		mkdir(t, host)
		mkdir(t, fifos)
		names := make([]string, files)
		for i := range names {
			names[i] = fmt.Sprintf("f%03d", i)
			writeTree(t, host, map[string]string{names[i]: "x"})
			mkfifo(t, filepath.Join(fifos, names[i]))
		}
		f := Pin(Mount{Host: host, Sandbox: "/data"})
		swapped := make(chan struct{})
		go func() {
			defer close(swapped)
			// From the last file down, to meet Read as it goes up.
			for _, name := range slices.Backward(names) {
				if err := os.Rename(filepath.Join(fifos, name), filepath.Join(host, name)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		type read struct {
			skipped []Skipped
			err     error
		}
		done := make(chan read, 1)
		go func() {
			_, skipped, err := f.Read(context.Background(), Limits{})
			done <- read{skipped, err}
		}()
		var got read
		select {
		case got = <-done:
		case <-time.After(10 * time.Second):
			for _, name := range names {
				unblockFIFO(filepath.Join(host, name))
			}
			t.Fatalf("round %d: Read blocked on a FIFO swapped in for a file", round)
		}
		<-swapped
		if got.err != nil {
			t.Fatal(got.err)
		}
		for _, s := range got.skipped {
			if strings.Contains(s.Reason, "when opened") {
				t.Logf("round %d: %s: %s", round, s.Path, s.Reason)
				return
			}
		}
	}
	t.Skipf("in %d rounds no FIFO was swapped in between the listing and the open", rounds)
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
}
