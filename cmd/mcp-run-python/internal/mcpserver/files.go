package mcpserver

import (
	"context"
	"encoding/base64"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/dustin/go-humanize"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.uber.org/zap"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/filestore"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/identity"
	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/render"
	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// fileResults turns the files and figures of a call into content after its
// text: a resource_link for each file, which resources/read then answers,
// and images inline.
type fileResults struct {
	store      *filestore.Store // nil: files are off
	imageLimit int64
	log        *zap.Logger
}

// maxImages bounds the images one result shows inline: the frames that
// bring them come from the sandbox, and each is up to --image-limit.
const maxImages = 20

// maxNamed bounds the names a note lists before it counts the rest, so
// that a note stays one short line however many files a call brought.
const maxNamed = 5

// keep stores the files res brought in scope for owner, and returns them as
// the render package lists them, and the content items that follow the
// text. An SVG figure is stored and linked as SVG files are: it is a
// document that may carry scripts, never image content. A file the store
// cannot keep, an image too big to send inline or past maxImages, is said
// in a last text item.
func (f fileResults) keep(owner identity.Principal, scope filestore.Scope, res supervisor.Result) ([]render.File, []mcp.Content) {
	if f.store == nil {
		return nil, nil
	}
	r := results{fileResults: f}
	for _, file := range res.Files {
		switch {
		case file.Deleted:
			f.store.Remove(owner, scope, file.Path)
			continue
		case file.Omitted:
			continue // the output already says so
		}
		e, ok := r.put(owner, scope, file.Path, file.Data)
		if !ok {
			continue
		}
		r.link(e, "a file the code wrote; resources/read returns it")
		if filestore.IsImage(e.MIMEType) {
			r.image(e.Path, e.MIMEType, file.Data)
		}
	}
	for i, fig := range res.Figures {
		name := fmt.Sprintf("figure %d", i+1)
		if !figureIs(fig.MIMEType, fig.Data) {
			// The type is what the code's _repr_ method claimed.
			r.misfits.add(fig.MIMEType, name)
			continue
		}
		if fig.MIMEType == "image/svg+xml" {
			if e, ok := r.put(owner, scope, fmt.Sprintf("%s/figure-%d.svg", figureDir, i+1), fig.Data); ok {
				r.link(e, name+" of the code, as SVG; resources/read returns it")
			}
			continue
		}
		r.image(name, fig.MIMEType, fig.Data)
	}
	r.summarise()
	if len(r.notes) > 0 {
		r.content = append(r.content, mcp.NewTextContent("["+strings.Join(r.notes, "; ")+"]"))
	}
	return r.kept, r.content
}

// figureDir is where SVG figures are stored, beside the call's files: a
// hidden folder, which code seldom writes to itself.
const figureDir = ".figures"

// results collects the content of one call's files and figures.
type results struct {
	fileResults
	kept    []render.File
	content []mcp.Content
	notes   []string
	images  int
	// unkept are the files the store refused, by why; misfits the
	// figures whose bytes are not their type, by type; hidden counts the
	// images past maxImages.
	unkept, misfits grouped
	hidden          int
}

// grouped are names by reason, the reasons in the order first seen.
type grouped struct {
	reasons []string
	names   map[string][]string
}

func (g *grouped) add(reason, name string) {
	if g.names == nil {
		g.names = map[string][]string{}
	}
	if g.names[reason] == nil {
		g.reasons = append(g.reasons, reason)
	}
	g.names[reason] = append(g.names[reason], name)
}

// notes are one note for each of the first maxNamed reasons, which note
// makes of the names and the reason, and a count of the rest.
func (g *grouped) notes(note func(names []string, reason string) string) []string {
	var out []string
	for i, why := range g.reasons {
		if i == maxNamed {
			out = append(out, fmt.Sprintf("and %d more for other reasons", len(g.reasons)-maxNamed))
			break
		}
		out = append(out, note(g.names[why], why))
	}
	return out
}

// put stores a file, or counts it among those not kept.
func (r *results) put(owner identity.Principal, scope filestore.Scope, p string, data []byte) (filestore.Entry, bool) {
	e, err := r.store.Put(owner, scope, p, data)
	if err != nil {
		r.unkept.add(err.Error(), p)
		return filestore.Entry{}, false
	}
	r.kept = append(r.kept, listed(e))
	return e, true
}

// link adds the resource_link of a stored file.
func (r *results) link(e filestore.Entry, description string) {
	link := mcp.NewResourceLink(e.URI, e.Path, description, e.MIMEType)
	link.Size = &e.Size
	r.content = append(r.content, link)
}

// image adds data as image content, or a note when it is past the limit of
// size or of number.
func (r *results) image(name, mimeType string, data []byte) {
	if r.imageLimit > 0 && int64(len(data)) > r.imageLimit {
		r.notes = append(r.notes, fmt.Sprintf("%s is not shown: it is %s, past the %s limit of images shown (--image-limit)",
			name, humanize.IBytes(uint64(len(data))), humanize.IBytes(uint64(r.imageLimit))))
		return
	}
	if r.images >= maxImages {
		r.hidden++
		return
	}
	r.images++
	r.content = append(r.content, mcp.NewImageContent(base64.StdEncoding.EncodeToString(data), mimeType))
}

// summarise adds the notes that group: figures that are not what they
// say, images past maxImages, and files not kept, logged once for the call.
func (r *results) summarise() {
	r.notes = append(r.notes, r.misfits.notes(func(names []string, mimeType string) string {
		if len(names) == 1 {
			return fmt.Sprintf("%s is not shown: its bytes are not %s", names[0], mimeType)
		}
		return fmt.Sprintf("%s are not shown: their bytes are not %s", some(names), mimeType)
	})...)
	if r.hidden > 0 {
		r.notes = append(r.notes, fmt.Sprintf("%d more images are not shown: a result shows at most %d", r.hidden, maxImages))
	}
	if len(r.unkept.reasons) == 0 {
		return
	}
	r.notes = append(r.notes, r.unkept.notes(func(paths []string, why string) string {
		return fmt.Sprintf("%s not kept: %s", some(paths), why)
	})...)
	total := 0
	for _, paths := range r.unkept.names {
		total += len(paths)
	}
	first := r.unkept.reasons[0]
	r.log.Warn("files of a call were not kept", zap.Int("files", total), zap.String("first", r.unkept.names[first][0]+": "+first))
}

// some names the first maxNamed items, and counts the rest.
func some(items []string) string {
	if len(items) <= maxNamed {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:maxNamed], ", "), len(items)-maxNamed)
}

// figureIs reports whether a figure's bytes are what its type says: as
// for files, clients decode an image by its type, and some reject a whole
// conversation over one that is not what it says. An SVG is text, which no
// sniffing tells from other text.
func figureIs(mimeType string, data []byte) bool {
	if mimeType == "image/svg+xml" {
		return utf8.Valid(data)
	}
	return filestore.IsImage(mimeType) && http.DetectContentType(data) == mimeType
}

// listed is a stored file as results and list_session_files list it.
func listed(e filestore.Entry) render.File {
	return render.File{Path: e.Path, Size: e.Size, MIMEType: e.MIMEType, URI: e.URI}
}

// notYours starts the URI of a resources/read that mcp-go is made to
// answer as it answers a URI no template matches.
const notYours = "no file of yours at "

// addFileResources serves the stored files: session://{id}/{path} for the
// files of Python sessions, call://{id}/{path} for those of fresh calls.
func addFileResources(s *server.MCPServer, hooks *server.Hooks, store *filestore.Store, principals principals) {
	// A URI at which the caller has no file (unknown, expired, or another
	// owner's) gets the error of an unknown resource, RESOURCE_NOT_FOUND
	// (-32002; INVALID_PARAMS from 2026-07-28), rather than the internal
	// error that mcp-go makes of every error a handler returns. mcp-go
	// answers so only for a URI that no template matches: such a request
	// is given one, which its message shows.
	hooks.AddBeforeReadResource(func(ctx context.Context, _ any, req *mcp.ReadResourceRequest) {
		if !store.Has(principals.of(ctx), req.Params.URI) {
			req.Params.URI = notYours + req.Params.URI
		}
	})
	read := func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		e, data, err := store.Get(principals.of(ctx), req.Params.URI)
		if err != nil {
			return nil, fmt.Errorf("%w: %s", err, req.Params.URI)
		}
		return []mcp.ResourceContents{fileContents(e, data)}, nil
	}
	s.AddResourceTemplate(mcp.NewResourceTemplate("session://{session_id}/{+path}", "session file",
		mcp.WithTemplateDescription("A file that code run in a Python session wrote under its working directory")), read)
	s.AddResourceTemplate(mcp.NewResourceTemplate("call://{call_id}/{+path}", "call file",
		mcp.WithTemplateDescription("A file that a run_python_code call wrote under its working directory, kept for --files-ttl")), read)
}

// fileContents is a stored file as resources/read sends it: text when its
// type is text and its bytes are UTF-8, else base64.
func fileContents(e filestore.Entry, data []byte) mcp.ResourceContents {
	base, _, _ := mime.ParseMediaType(e.MIMEType)
	textual := strings.HasPrefix(base, "text/") || base == "application/json" || strings.HasSuffix(base, "+xml") || base == "application/xml"
	if textual && utf8.Valid(data) {
		return mcp.TextResourceContents{URI: e.URI, MIMEType: e.MIMEType, Text: string(data)}
	}
	return mcp.BlobResourceContents{URI: e.URI, MIMEType: e.MIMEType, Blob: base64.StdEncoding.EncodeToString(data)}
}
