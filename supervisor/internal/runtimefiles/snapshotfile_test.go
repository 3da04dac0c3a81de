package runtimefiles

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// rawSnapshot makes a snapshot as Pyodide's makeMemorySnapshot lays it out:
// a header of prefix bytes whose second uint32 is its length, then memory
// bytes of zeros with the given pages filled.
func rawSnapshot(t *testing.T, prefix, memory int, filled ...int) []byte {
	t.Helper()
	raw := make([]byte, prefix+memory)
	binary.LittleEndian.PutUint32(raw, 1886286592)
	binary.LittleEndian.PutUint32(raw[4:], uint32(prefix))
	for i := 8; i < prefix; i++ {
		raw[i] = byte(i)
	}
	for _, p := range filled {
		page := raw[prefix+p*snapshotPage : min(prefix+(p+1)*snapshotPage, len(raw))]
		for i := range page {
			page[i] = byte(p + i + 1)
		}
		page[len(page)-1] = 0 // a page that ends in zeros is not a zero page
	}
	return raw
}

// unpackSnapshot is the reference reader of the format: Pyodide's snapshot
// as it was before packSnapshot.
func unpackSnapshot(t *testing.T, file []byte) ([]byte, error) {
	t.Helper()
	l, err := readSnapshotLayout(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		return nil, err
	}
	at := l.dataAt()
	raw := make([]byte, int64(l.prefix)+int64(l.memory))
	at += int64(copy(raw, file[at:at+int64(l.prefix)]))
	for _, r := range l.runs {
		n := l.runBytes(r)
		copy(raw[int64(l.prefix)+int64(r.first)*snapshotPage:], file[at:at+n])
		at += n
	}
	return raw, nil
}

func TestSnapshotFileRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name           string
		prefix, memory int
		filled         []int
		runs           int
	}{
		{"empty memory", 432, 0, nil, 0},
		{"all zero", 432, 8 * snapshotPage, nil, 0},
		{"all filled", 432, 3 * snapshotPage, []int{0, 1, 2}, 1},
		{"gaps", 448, 10 * snapshotPage, []int{0, 1, 4, 6, 7, 9}, 4},
		{"short last page", 432, 5*snapshotPage + 100, []int{1, 5}, 2},
		{"short zero last page", 12, 5*snapshotPage + 100, []int{4}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := rawSnapshot(t, tc.prefix, tc.memory, tc.filled...)
			file, err := packSnapshot(raw)
			if err != nil {
				t.Fatal(err)
			}
			l, err := readSnapshotLayout(bytes.NewReader(file), int64(len(file)))
			if err != nil {
				t.Fatal(err)
			}
			if len(l.runs) != tc.runs {
				t.Errorf("%d runs, want %d: %v", len(l.runs), tc.runs, l.runs)
			}
			// Only the filled pages are stored.
			stored := 0
			for _, p := range tc.filled {
				stored += min(snapshotPage, tc.memory-p*snapshotPage)
			}
			if want := int(l.dataAt()) + tc.prefix + stored; len(file) != want {
				t.Errorf("%d bytes, want %d", len(file), want)
			}
			back, err := unpackSnapshot(t, file)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(back, raw) {
				t.Error("the snapshot read back differs from the one packed")
			}
		})
	}
}

func TestSnapshotFileRejected(t *testing.T) {
	file, err := packSnapshot(rawSnapshot(t, 432, 10*snapshotPage, 0, 1, 4, 6, 7, 9))
	if err != nil {
		t.Fatal(err)
	}
	edit := func(at int, value uint32) []byte {
		f := bytes.Clone(file)
		binary.LittleEndian.PutUint32(f[at:], value)
		return f
	}
	for _, tc := range []struct {
		name string
		file []byte
	}{
		{"empty", nil},
		{"Pyodide's own format", rawSnapshot(t, 432, 4*snapshotPage, 1)},
		{"garbage", bytes.Repeat([]byte{0xa5}, 4096)},
		{"cut in its head", file[:20]},
		{"cut in its runs", file[:snapshotHead+4]},
		{"cut in its data", file[:len(file)-1]},
		{"longer than its head says", append(bytes.Clone(file), 0)},
		{"another version", edit(8, snapshotVersion+1)},
		{"another page size", edit(12, 65536)},
		{"a header past the end", edit(16, 1<<30)},
		{"more runs than pages", edit(20, 11)},
		{"runs out of order", edit(snapshotHead+8, 0)},
		{"an empty run", edit(snapshotHead+4, 0)},
		{"a run past the memory", edit(snapshotHead+8*3+4, 2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readSnapshotLayout(bytes.NewReader(tc.file), int64(len(tc.file)))
			if !errors.Is(err, errSnapshotFile) {
				t.Errorf("got %v, want %v", err, errSnapshotFile)
			}
		})
	}
}

func TestPackSnapshotRefusesBadHeader(t *testing.T) {
	// raw is a snapshot of size bytes whose header claims prefix of them.
	raw := func(size int, prefix uint32) []byte {
		r := make([]byte, size)
		binary.LittleEndian.PutUint32(r[4:], prefix)
		return r
	}
	for _, tc := range []struct {
		name string
		raw  []byte
	}{
		{"too short", make([]byte, 8)},
		{"a header longer than the snapshot", raw(64, 65)},
		{"a header shorter than its fields", raw(64, 8)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := packSnapshot(tc.raw); err == nil {
				t.Error("packed")
			}
		})
	}
}

func TestCheckSnapshot(t *testing.T) {
	dir := t.TempDir()
	file, err := packSnapshot(rawSnapshot(t, 432, 4*snapshotPage, 2))
	if err != nil {
		t.Fatal(err)
	}
	good, old := filepath.Join(dir, "good.bin"), filepath.Join(dir, "old.bin")
	if err := os.WriteFile(good, file, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(old, rawSnapshot(t, 432, 4*snapshotPage, 2), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := checkSnapshot(good); err != nil {
		t.Errorf("a good file: %v", err)
	}
	if err := checkSnapshot(old); !errors.Is(err, errSnapshotFile) {
		t.Errorf("a file of Pyodide's format: got %v, want %v", err, errSnapshotFile)
	}
	if err := checkSnapshot(filepath.Join(dir, "none.bin")); err == nil {
		t.Error("a missing file passed")
	}
}
