package supervisor

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/dustin/go-humanize"
	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/bridge"
	"github.com/mcp-run-python/mcp-run-python/supervisor/mount"
)

// putMounts copies the mounted host folders into w's file system. The
// trusted side reads them, so the worker needs no permission on the host.
func (s *Supervisor) putMounts(ctx context.Context, w *worker) error {
	if len(s.cfg.Mounts) == 0 {
		return nil
	}
	var dirs []string
	var files []bridge.Wheel
	for _, m := range s.cfg.Mounts {
		dirs = append(dirs, m.Sandbox)
		got, skipped, err := m.Read(ctx, s.cfg.MountLimits)
		if err != nil {
			return err
		}
		for _, sk := range skipped {
			s.log.Warn("a file of a mounted folder is left out", zap.Stringer("mount", m), zap.String("path", sk.Path), zap.String("why", sk.Reason))
		}
		for _, f := range got {
			files = append(files, bridge.Wheel{File: bridge.File{Name: path.Join(m.Sandbox, f.Path)}, Data: f.Data})
		}
	}
	if err := w.conn.Put(ctx, dirs, files); err != nil {
		return fmt.Errorf("put the mounted folders into the interpreter: %w", err)
	}
	return nil
}

// watched are the directories whose changes a run sends back: the working
// directory when files come back, and every writable mount.
func (s *Supervisor) watched() []string {
	var dirs []string
	if s.cfg.Files {
		dirs = append(dirs, WorkDir)
	}
	for _, m := range s.cfg.Mounts {
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
func (s *Supervisor) takeFiles(ctx context.Context, res *Result, files bridge.Files, onLine func(Line)) {
	for _, f := range files.Figures {
		res.Figures = append(res.Figures, Figure{MIMEType: f.MIMEType, Data: f.Data})
	}
	note := func(text string) {
		res.Output = append(res.Output, text)
		if onLine != nil {
			onLine(Line{Stream: Stderr, Text: text})
		}
	}
	back := make([][]mount.Change, len(s.cfg.Mounts))
	var lost []string
	for _, ch := range files.Changes {
		// The paths come from the sandbox: each is placed by where it
		// claims to be, and the mount package checks it again.
		p := path.Clean(ch.Path)
		if s.cfg.Files {
			if rel, ok := under(p, WorkDir); ok {
				res.Files = append(res.Files, File{Path: rel, Size: ch.Size, Data: ch.Data, Deleted: ch.Deleted, Omitted: ch.Omitted})
			}
		}
		for i, m := range s.cfg.Mounts {
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
	for _, f := range res.Files {
		if f.Omitted {
			note(fmt.Sprintf("[file not returned: %s is %s, past the %s limit of files a call returns]",
				f.Path, humanize.IBytes(uint64(f.Size)), humanize.IBytes(uint64(s.cfg.FilesLimit))))
		}
	}
	if len(lost) > 0 {
		note(fmt.Sprintf("[not written back, past the %s limit of files a call returns: %s]",
			humanize.IBytes(uint64(s.cfg.FilesLimit)), strings.Join(lost, ", ")))
	}
	for i, changes := range back {
		if len(changes) == 0 {
			continue
		}
		m := s.cfg.Mounts[i]
		if err := m.Apply(ctx, changes, s.cfg.MountLimits); err != nil {
			s.log.Warn("cannot write a call's files back to a mounted folder", zap.Stringer("mount", m), zap.Error(err))
			note(fmt.Sprintf("[the changes under %s were not written back: %v]", m.Sandbox, err))
		}
	}
}

// under returns p relative to dir, when p is inside it.
func under(p, dir string) (string, bool) {
	rel, ok := strings.CutPrefix(p, strings.TrimSuffix(dir, "/")+"/")
	return rel, ok && rel != ""
}
