package runtimefiles

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// A snapshot file holds Pyodide's memory snapshot without the zero pages of
// its wasm memory (about 45% of them): a worker reads only the other pages,
// straight into its grown wasm memory, whose fresh pages are zero already
// (js/snapshotfile.ts, openSnapshot and restorePages, reads it). Little-endian:
//
//	offset  size  what
//	0       8     snapshotMagic
//	8       4     snapshotVersion
//	12      4     the page size, snapshotPage
//	16      4     P, the length of Pyodide's header
//	20      4     R, the number of runs
//	24      8     M, the length of the wasm memory
//	32      8·R   runs of non-zero pages: first page, number of pages
//	        P     Pyodide's header (its magic, build id and JSON), verbatim
//	        …     the runs' bytes, in order; the memory's last page may be short
//
// Runs are in increasing order, non-empty and disjoint, inside the memory;
// the file ends with the last run.
const (
	snapshotMagic   = "mrpysnap"
	snapshotVersion = 1
	snapshotPage    = 4096
	snapshotHead    = 32
)

// errSnapshotFile marks a snapshot file that is not one of this format:
// an older format, or a damaged file. It is made again.
var errSnapshotFile = errors.New("not a memory snapshot of this format")

// snapshotRun is a run of non-zero pages of the wasm memory.
type snapshotRun struct{ first, pages uint32 }

// snapshotLayout is what the head of a snapshot file says.
type snapshotLayout struct {
	prefix uint32 // P: the length of Pyodide's header
	memory uint64 // M: the length of the wasm memory
	runs   []snapshotRun
}

// dataAt is the offset of Pyodide's header in the file; the runs' bytes
// follow it.
func (l snapshotLayout) dataAt() int64 { return snapshotHead + 8*int64(len(l.runs)) }

// runBytes is the length of run r's bytes: its pages, the last one cut at
// the end of the memory.
func (l snapshotLayout) runBytes(r snapshotRun) int64 {
	start := int64(r.first) * snapshotPage
	return min(start+int64(r.pages)*snapshotPage, int64(l.memory)) - start
}

// size is the length of the whole file.
func (l snapshotLayout) size() int64 {
	n := l.dataAt() + int64(l.prefix)
	for _, r := range l.runs {
		n += l.runBytes(r)
	}
	return n
}

// packSnapshot turns the snapshot Pyodide made (makeMemorySnapshot: a
// header whose second little-endian uint32 is its own length, then the
// whole wasm memory) into a snapshot file.
func packSnapshot(raw []byte) ([]byte, error) {
	if len(raw) < 12 {
		return nil, fmt.Errorf("pack the memory snapshot: %d bytes is too short for Pyodide's header", len(raw))
	}
	prefix := binary.LittleEndian.Uint32(raw[4:])
	if prefix < 12 || uint64(prefix) > uint64(len(raw)) {
		return nil, fmt.Errorf("pack the memory snapshot: Pyodide's header claims %d of its %d bytes", prefix, len(raw))
	}
	memory := raw[prefix:]
	if uint64(len(memory)) > 1<<32 { // wasm32's most
		return nil, fmt.Errorf("pack the memory snapshot: %d bytes of memory is more than wasm32 has", len(memory))
	}
	l := snapshotLayout{prefix: prefix, memory: uint64(len(memory))}
	var zero [snapshotPage]byte
	for p := 0; p*snapshotPage < len(memory); p++ {
		page := memory[p*snapshotPage : min((p+1)*snapshotPage, len(memory))]
		if bytes.Equal(page, zero[:len(page)]) {
			continue
		}
		if n := len(l.runs); n > 0 && int(l.runs[n-1].first+l.runs[n-1].pages) == p {
			l.runs[n-1].pages++
		} else {
			l.runs = append(l.runs, snapshotRun{first: uint32(p), pages: 1})
		}
	}
	out := make([]byte, 0, l.size())
	out = append(out, snapshotMagic...)
	out = binary.LittleEndian.AppendUint32(out, snapshotVersion)
	out = binary.LittleEndian.AppendUint32(out, snapshotPage)
	out = binary.LittleEndian.AppendUint32(out, l.prefix)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(l.runs)))
	out = binary.LittleEndian.AppendUint64(out, l.memory)
	for _, r := range l.runs {
		out = binary.LittleEndian.AppendUint32(out, r.first)
		out = binary.LittleEndian.AppendUint32(out, r.pages)
	}
	out = append(out, raw[:prefix]...)
	for _, r := range l.runs {
		start := int64(r.first) * snapshotPage
		out = append(out, memory[start:start+l.runBytes(r)]...)
	}
	return out, nil
}

// readSnapshotLayout reads and checks the head of a snapshot file of size
// bytes: what js/snapshotfile.ts checks before it restores from one.
func readSnapshotLayout(r io.ReaderAt, size int64) (snapshotLayout, error) {
	var head [snapshotHead]byte
	if _, err := r.ReadAt(head[:], 0); err != nil {
		return snapshotLayout{}, fmt.Errorf("%w: head: %w", errSnapshotFile, err)
	}
	if string(head[:8]) != snapshotMagic {
		return snapshotLayout{}, fmt.Errorf("%w: no %q at its start", errSnapshotFile, snapshotMagic)
	}
	le := binary.LittleEndian
	if v := le.Uint32(head[8:]); v != snapshotVersion {
		return snapshotLayout{}, fmt.Errorf("%w: version %d, not %d", errSnapshotFile, v, snapshotVersion)
	}
	if p := le.Uint32(head[12:]); p != snapshotPage {
		return snapshotLayout{}, fmt.Errorf("%w: pages of %d bytes, not %d", errSnapshotFile, p, snapshotPage)
	}
	l := snapshotLayout{prefix: le.Uint32(head[16:]), memory: le.Uint64(head[24:])}
	count := int64(le.Uint32(head[20:]))
	pages := (l.memory + snapshotPage - 1) / snapshotPage
	if l.memory > 1<<32 || uint64(count) > pages || snapshotHead+8*count+int64(l.prefix) > size {
		return snapshotLayout{}, fmt.Errorf("%w: a head that does not fit its %d bytes", errSnapshotFile, size)
	}
	table := make([]byte, 8*count)
	if _, err := r.ReadAt(table, snapshotHead); err != nil {
		return snapshotLayout{}, fmt.Errorf("%w: runs: %w", errSnapshotFile, err)
	}
	l.runs = make([]snapshotRun, count)
	var next uint64 // the first page the next run may start at
	for i := range l.runs {
		run := snapshotRun{first: le.Uint32(table[8*i:]), pages: le.Uint32(table[8*i+4:])}
		if run.pages == 0 || uint64(run.first) < next || uint64(run.first)+uint64(run.pages) > pages {
			return snapshotLayout{}, fmt.Errorf("%w: run %d (pages %d+%d) out of order or out of %d pages", errSnapshotFile, i, run.first, run.pages, pages)
		}
		next = uint64(run.first) + uint64(run.pages)
		l.runs[i] = run
	}
	if want := l.size(); want != size {
		return snapshotLayout{}, fmt.Errorf("%w: %d bytes where its head says %d", errSnapshotFile, size, want)
	}
	return l, nil
}

// DataOffset returns where the memory's bytes begin in a snapshot file of
// size bytes read through r: what Pyodide restores from, past this
// format's header.
func DataOffset(r io.ReaderAt, size int64) (int64, error) {
	l, err := readSnapshotLayout(r, size)
	if err != nil {
		return 0, err
	}
	return l.dataAt(), nil
}

// checkSnapshot reports whether the file at path is a snapshot file of
// this format whose length is what its head says: one of an older format,
// or cut short, is made again rather than tried by every worker.
func checkSnapshot(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if _, err := readSnapshotLayout(f, st.Size()); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
