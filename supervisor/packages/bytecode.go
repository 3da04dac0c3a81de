package packages

// Compiled variants of wheels: the same wheel with its modules' bytecode
// added, made once on the trusted side (supervisor/internal/install/bytecode.go) and kept in
// the cache beside the original, which stays the source of truth:
//
//	<dir>/wheels/sha256/<hex>/<file name>                      the wheel, checked against <hex>
//	<dir>/wheels/sha256/<hex>/bytecode/<key>/<file name>       the wheel with its .pyc files added
//	<dir>/wheels/sha256/<hex>/bytecode/<key>/bytecode.json     what was compiled, and the sha256 of the above
//
// <key> names the interpreter the bytecode is for (its cache tag and the
// Pyodide release, which fixes the magic number). Both files are inside the
// wheel's entry of the cache directory (package cachedir), so its size
// counts them and a prune removes them with the wheel.

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/natefinch/atomic"
)

// Bytecode describes the compiled variant of a wheel: its manifest,
// bytecode.json.
type Bytecode struct {
	// Tag and Magic are the compiling interpreter's cache tag
	// (sys.implementation.cache_tag, such as "cpython-314") and magic
	// number (importlib.util.MAGIC_NUMBER, in hex).
	Tag   string `json:"tag"`
	Magic string `json:"magic"`
	// Modules is the number of modules compiled; Skipped those that did
	// not compile (they import from source, as without bytecode).
	Modules int `json:"modules"`
	Skipped int `json:"skipped,omitempty"`
	// Crashed are the modules (paths in the wheel) whose compile ended the
	// compiling interpreter, which were then skipped.
	Crashed []string `json:"crashed,omitempty"`
	// File is the compiled wheel's name, SHA256 and Size its content's;
	// File is "" when the wheel has nothing to compile, and the original is
	// installed.
	File   string `json:"file,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	Size   int64  `json:"size,omitempty"`
}

// manifestName is the manifest's name in a bytecode directory.
const manifestName = "bytecode.json"

// maxManifest bounds a manifest read back.
const maxManifest = 64 << 10

// bytecodeDir is where the variants of f for key live: inside f's entry.
func (c *Cache) bytecodeDir(f PlanFile, key string) string {
	return filepath.Join(filepath.Dir(c.Path(f.SHA256, f.Filename)), "bytecode", key)
}

// validKey reports whether key can name a bytecode directory.
func validKey(key string) bool {
	return key != "" && plainFilename(key) && !strings.HasPrefix(key, ".")
}

// Compiled returns the compiled variant of f for key: done reports that f
// was compiled for key, and path is the variant to install instead of f,
// or "" when f had nothing to compile. A variant whose content does not
// match its manifest (checked once per process, like the wheels) is
// removed with it, and done is false: it is made again.
func (c *Cache) Compiled(f LocalFile, key string) (path string, size int64, done bool) {
	if !validKey(key) || !sha256RE.MatchString(f.SHA256) || !plainFilename(f.Filename) {
		return "", 0, false
	}
	dir := c.bytecodeDir(f.PlanFile, key)
	data, err := readLimited(filepath.Join(dir, manifestName), maxManifest)
	if err != nil {
		return "", 0, false
	}
	var m Bytecode
	if err := json.Unmarshal(data, &m); err != nil {
		os.RemoveAll(dir)
		return "", 0, false
	}
	if m.File == "" {
		return "", 0, true
	}
	p := filepath.Join(dir, m.File)
	if m.File != f.Filename || !sha256RE.MatchString(m.SHA256) || !c.present(p, m.SHA256) {
		os.RemoveAll(dir)
		return "", 0, false
	}
	return p, m.Size, true
}

// SourcePath returns the path of the wheel in the cache that the file at
// p was made from: p itself, or for a compiled variant the original. It
// names a package's content for keys that must not change once a variant
// exists (a learned set's).
func SourcePath(p string) string {
	dir := filepath.Dir(p)
	bc := filepath.Dir(dir)
	if filepath.Base(bc) != "bytecode" {
		return p
	}
	entry := filepath.Dir(bc)
	if !sha256RE.MatchString(filepath.Base(entry)) {
		return p
	}
	return filepath.Join(entry, filepath.Base(p))
}

// StoreBytecode makes the compiled variant of f for key: the wheel with the
// .pyc files of archive (a zip, as the compile worker sends it) added, and
// its manifest. It returns the variant's path ("" for a wheel with nothing
// compiled, whose manifest says so, so that it is not compiled again).
//
// The archive comes from a worker where no user code ran, but it was made
// from hostile source, so it is checked rather than trusted: every member
// must be the unchecked-hash .pyc (PEP 552) of the interpreter's magic
// number, named __pycache__/<module>.<tag>.pyc beside a module the wheel
// has; nothing else lands in the variant. A .pyc the wheel ships itself is
// kept, and ours for it dropped.
func (c *Cache) StoreBytecode(f LocalFile, key string, m Bytecode, archive []byte) (string, error) {
	if !validKey(key) || !sha256RE.MatchString(f.SHA256) || !plainFilename(f.Filename) {
		return "", fmt.Errorf("bytecode of %s: bad key %q or file", f.Filename, key)
	}
	magic, err := hex.DecodeString(m.Magic)
	if err != nil || len(magic) != 4 {
		return "", fmt.Errorf("bytecode of %s: bad magic number %q", f.Filename, m.Magic)
	}
	if !validTag(m.Tag) {
		return "", fmt.Errorf("bytecode of %s: bad cache tag %q", f.Filename, m.Tag)
	}
	dir := c.bytecodeDir(f.PlanFile, key)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("bytecode of %s: %w", f.Filename, err)
	}
	m.File, m.SHA256, m.Size = "", "", 0
	if m.Modules > 0 {
		pycs, err := checkPycs(f.Path, archive, m.Tag, magic)
		if err != nil {
			return "", fmt.Errorf("bytecode of %s: %w", f.Filename, err)
		}
		if len(pycs) > 0 {
			final := filepath.Join(dir, f.Filename)
			sum, size, err := writeCompiled(f.Path, final, pycs)
			if err != nil {
				return "", fmt.Errorf("bytecode of %s: %w", f.Filename, err)
			}
			m.File, m.SHA256, m.Size = f.Filename, sum, size
			c.shared.mu.Lock()
			c.shared.verified[final] = true
			c.shared.mu.Unlock()
		}
	}
	data, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	// Last, and whole: the manifest is what says the variant is there.
	if err := atomic.WriteFile(filepath.Join(dir, manifestName), bytes.NewReader(data)); err != nil {
		return "", fmt.Errorf("bytecode of %s: %w", f.Filename, err)
	}
	if m.File == "" {
		return "", nil
	}
	return filepath.Join(dir, m.File), nil
}

// validTag reports whether tag is a cache tag: letters, digits, '-' and '_'.
func validTag(tag string) bool {
	if tag == "" || len(tag) > 64 {
		return false
	}
	for _, r := range tag {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// pyc is one checked .pyc file of an archive.
type pyc struct {
	name string
	data []byte
}

// checkPycs reads the archive's .pyc files and checks each against the
// wheel at wheelPath (see StoreBytecode).
func checkPycs(wheelPath string, archive []byte, tag string, magic []byte) ([]pyc, error) {
	wheel, err := zip.OpenReader(wheelPath)
	if err != nil {
		return nil, fmt.Errorf("read the wheel: %w", err)
	}
	defer wheel.Close()
	members := map[string]bool{}
	for _, zf := range wheel.File {
		members[zf.Name] = true
	}
	ar, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
	if err != nil {
		return nil, fmt.Errorf("the compiled archive: %w", err)
	}
	var pycs []pyc
	seen := map[string]bool{}
	for _, zf := range ar.File {
		source, ok := pycSource(zf.Name, tag)
		if !ok || !members[source] || seen[zf.Name] {
			return nil, fmt.Errorf("the compiled archive has %q, which is no module's bytecode", zf.Name)
		}
		seen[zf.Name] = true
		if members[zf.Name] {
			continue // the wheel ships its own
		}
		rc, err := zf.Open()
		if err != nil {
			return nil, fmt.Errorf("the compiled archive: %s: %w", zf.Name, err)
		}
		// Bounded by the archive, which the bridge's read limit bounds:
		// members are stored, not compressed.
		data, err := io.ReadAll(io.LimitReader(rc, int64(len(archive))+1))
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("the compiled archive: %s: %w", zf.Name, err)
		}
		// PEP 552: magic, flags (bit 0: hash-based; bit 1: check the
		// source), the source's hash, then the code.
		if len(data) < 16 || !bytes.Equal(data[:4], magic) || binary.LittleEndian.Uint32(data[4:8]) != 1 {
			return nil, fmt.Errorf("the compiled archive: %s is not an unchecked-hash .pyc of magic %x", zf.Name, magic)
		}
		pycs = append(pycs, pyc{zf.Name, data})
	}
	return pycs, nil
}

// pycSource returns the module source that name, a .pyc path in a wheel,
// is the bytecode of: dir/__pycache__/<stem>.<tag>.pyc for dir/<stem>.py.
func pycSource(name, tag string) (string, bool) {
	if !strings.HasSuffix(name, "."+tag+".pyc") || strings.Contains(name, "\\") || path.Clean(name) != name || strings.HasPrefix(name, "/") {
		return "", false
	}
	dir, file := path.Split(name)
	if path.Base(dir) != "__pycache__" {
		return "", false
	}
	stem := strings.TrimSuffix(file, "."+tag+".pyc")
	if stem == "" || strings.HasPrefix(stem, ".") {
		return "", false
	}
	parent := path.Dir(strings.TrimSuffix(dir, "/"))
	if parent == "." {
		return stem + ".py", true
	}
	return parent + "/" + stem + ".py", true
}

// writeCompiled writes the wheel at src with pycs added to final, through a
// temporary file renamed into place, and returns its sha256 and size. The
// wheel's own members are copied as they are, compressed bytes and all.
func writeCompiled(src, final string, pycs []pyc) (string, int64, error) {
	wheel, err := zip.OpenReader(src)
	if err != nil {
		return "", 0, err
	}
	defer wheel.Close()
	tmp, err := os.CreateTemp(filepath.Dir(final), ".part-*")
	if err != nil {
		return "", 0, err
	}
	renamed := false
	defer func() {
		if !renamed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	zw := zip.NewWriter(tmp)
	for _, zf := range wheel.File {
		if err := zw.Copy(zf); err != nil {
			return "", 0, err
		}
	}
	for _, p := range pycs {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: p.name, Method: zip.Deflate})
		if err != nil {
			return "", 0, err
		}
		if _, err := w.Write(p.data); err != nil {
			return "", 0, err
		}
	}
	if err := zw.Close(); err != nil {
		return "", 0, err
	}
	if err := tmp.Sync(); err != nil {
		return "", 0, err
	}
	if err := tmp.Close(); err != nil {
		return "", 0, err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return "", 0, err
	}
	sum, err := hashFile(tmp.Name())
	if err != nil {
		return "", 0, err
	}
	fi, err := os.Stat(tmp.Name())
	if err != nil {
		return "", 0, err
	}
	if err := os.Rename(tmp.Name(), final); err != nil {
		return "", 0, err
	}
	renamed = true
	return sum, fi.Size(), nil
}

// readLimited reads a whole small file, refusing one over limit bytes.
func readLimited(p string, limit int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, errors.New(p + ": too large")
	}
	return data, nil
}

// SourceBytes returns the total uncompressed size of the modules (.py
// files) of the wheel at p, as its directory says: what compiling it
// reads, to bound what it may make.
func SourceBytes(p string) (int64, error) {
	zr, err := zip.OpenReader(p)
	if err != nil {
		return 0, fmt.Errorf("reading wheel: %w", err)
	}
	defer zr.Close()
	var n int64
	for _, zf := range zr.File {
		if strings.HasSuffix(zf.Name, ".py") {
			n += int64(zf.UncompressedSize64 & (1<<62 - 1))
		}
	}
	return n, nil
}
