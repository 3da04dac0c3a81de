package supervisor

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/dustin/go-humanize"
	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/bridge"
	"github.com/mcp-run-python/mcp-run-python/supervisor/internal/worker"
	"github.com/mcp-run-python/mcp-run-python/supervisor/mount"
)

// callFiles moves a call's files: the mounted folders into its
// interpreter, and what its run sends back out of it.
type callFiles struct {
	cfg    Config
	mounts []*mount.Folder // cfg.Mounts, each pinned to its folder at New
	log    *zap.Logger
}

// putMounts copies the mounted host folders into w's file system. The
// trusted side reads them, so the worker needs no permission on the host.
func (cf *callFiles) putMounts(ctx context.Context, w *worker.Worker) error {
	if len(cf.mounts) == 0 {
		return nil
	}
	var dirs, readOnly []string
	var files []bridge.Payload
	for _, m := range cf.mounts {
		dirs = append(dirs, m.Sandbox)
		if !m.Writable {
			readOnly = append(readOnly, m.Sandbox)
		}
		got, skipped, err := m.Read(ctx, cf.cfg.MountLimits)
		if err != nil {
			return err
		}
		for _, sk := range skipped {
			cf.log.Warn("a file of a mounted folder is left out", zap.Stringer("mount", m.Mount), zap.String("path", sk.Path), zap.String("why", sk.Reason))
		}
		for _, f := range got {
			files = append(files, bridge.Payload{File: bridge.File{Name: path.Join(m.Sandbox, f.Path)}, Data: f.Data})
		}
	}
	if err := w.Conn.Put(ctx, dirs, readOnly, files); err != nil {
		return fmt.Errorf("put the mounted folders into the interpreter: %w", err)
	}
	return nil
}

// watched are the directories whose changes a run sends back: the working
// directory when files come back, and every writable mount.
func (c Config) watched() []string {
	var dirs []string
	if c.Files {
		dirs = append(dirs, WorkDir)
	}
	for _, m := range c.Mounts {
		if m.Writable {
			dirs = append(dirs, m.Sandbox)
		}
	}
	return dirs
}

// takeFiles moves what a run sent back into res: its figures, the files
// under WorkDir, and the changes under writable mounts, which are written
// back to their host folders. A write-back that fails, or a file too big
// to come back, is told in a line after the output, as a truncated output
// is.
func (cf *callFiles) takeFiles(ctx context.Context, res *Result, files bridge.Files, onLine func(Line)) {
	for _, f := range files.Figures {
		res.Figures = append(res.Figures, Figure{MIMEType: f.MIMEType, Data: f.Data})
	}
	note := func(text string) {
		res.Output = append(res.Output, text)
		if onLine != nil {
			onLine(Line{Stream: Stderr, Text: text})
		}
	}
	back := make([][]mount.Change, len(cf.cfg.Mounts))
	var lost []string
	for _, ch := range files.Changes {
		// The paths come from the sandbox: each is placed by where it
		// claims to be, and the mount package checks it again.
		p := path.Clean(ch.Path)
		if cf.cfg.Files {
			if rel, ok := under(p, WorkDir); ok {
				res.Files = append(res.Files, File{Path: rel, Size: ch.Size, Data: ch.Data, Deleted: ch.Deleted, Omitted: ch.Omitted})
			}
		}
		for i, m := range cf.cfg.Mounts {
			rel, ok := under(p, m.Sandbox)
			if !ok || !m.Writable {
				continue
			}
			if ch.Omitted {
				lost = append(lost, fmt.Sprintf("%s (%s)", p, humanize.IBytes(uint64(ch.Size))))
				continue
			}
			back[i] = append(back[i], mount.Change{Path: rel, Data: ch.Data, Deleted: ch.Deleted})
		}
	}
	// The notes are as short whatever the frame lists: one line each, a
	// few names in it.
	var omitted []string
	for _, f := range res.Files {
		if f.Omitted {
			omitted = append(omitted, fmt.Sprintf("%s is %s", f.Path, humanize.IBytes(uint64(f.Size))))
		}
	}
	if len(omitted) > 0 {
		what := "file"
		if len(omitted) > 1 {
			what = "files"
		}
		note(fmt.Sprintf("[%s not returned: %s, past the %s limit of files a call returns]",
			what, some(omitted), humanize.IBytes(uint64(cf.cfg.FilesLimit))))
	}
	if len(lost) > 0 {
		note(fmt.Sprintf("[not written back, past the %s limit of files a call returns: %s]",
			humanize.IBytes(uint64(cf.cfg.FilesLimit)), some(lost)))
	}
	if files.RefusedChanges > 0 || files.RefusedFigures > 0 {
		cf.log.Warn("a files frame listed more entries than a call may send back", zap.Int("refused_files", files.RefusedChanges),
			zap.Int("refused_figures", files.RefusedFigures), zap.Int("limit", bridge.MaxEntries))
		var refused []string
		if files.RefusedChanges > 0 {
			refused = append(refused, fmt.Sprintf("%d files (neither returned nor written back)", files.RefusedChanges))
		}
		if files.RefusedFigures > 0 {
			refused = append(refused, fmt.Sprintf("%d figures", files.RefusedFigures))
		}
		note(fmt.Sprintf("[refused, past the %d files and %d figures a call may send back: %s]",
			bridge.MaxEntries, bridge.MaxEntries, strings.Join(refused, " and ")))
	}
	for i, changes := range back {
		if len(changes) == 0 {
			continue
		}
		m := cf.mounts[i]
		if err := m.Apply(ctx, changes, cf.cfg.MountLimits); err != nil {
			cf.log.Warn("cannot write a call's files back to a mounted folder", zap.Stringer("mount", m.Mount), zap.Error(err))
			note(fmt.Sprintf("[the changes under %s were not written back: %v]", m.Sandbox, err))
		}
	}
}

// someNames is how many items a note names before it counts the rest.
const someNames = 5

// some lists the first items, and counts the rest: a note stays short
// however many files a frame lists.
func some(items []string) string {
	if len(items) <= someNames {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:someNames], ", "), len(items)-someNames)
}

// under returns p relative to dir, when p is inside it.
func under(p, dir string) (string, bool) {
	rel, ok := strings.CutPrefix(p, strings.TrimSuffix(dir, "/")+"/")
	return rel, ok && rel != ""
}
