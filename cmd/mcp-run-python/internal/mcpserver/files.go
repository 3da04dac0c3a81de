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

// keep stores the files res brought in scope for owner, and returns them as
// the render package lists them, and the content items that follow the
// text. A file the store cannot keep, or an image too big to send inline,
// is said in a last text item.
func (f fileResults) keep(owner string, scope filestore.Scope, res supervisor.Result) ([]render.File, []mcp.Content) {
	if f.store == nil {
		return nil, nil
	}
	var kept []render.File
	var content []mcp.Content
	var notes []string
	for _, file := range res.Files {
		switch {
		case file.Deleted:
			f.store.Remove(owner, scope, file.Path)
			continue
		case file.Omitted:
			continue // the output already says so
		}
		e, err := f.store.Put(owner, scope, file.Path, file.Data)
		if err != nil {
			f.log.Warn("a file of a call was not kept", zap.String("path", file.Path), zap.Error(err))
			notes = append(notes, fmt.Sprintf("%s was not kept: %v", file.Path, err))
			continue
		}
		kept = append(kept, listed(e))
		link := mcp.NewResourceLink(e.URI, e.Path, "a file the code wrote; resources/read returns it", e.MIMEType)
		link.Size = &e.Size
		content = append(content, link)
		if filestore.IsImage(e.MIMEType) {
			content, notes = f.image(content, notes, e.Path, e.MIMEType, file.Data)
		}
	}
	for i, fig := range res.Figures {
		name := fmt.Sprintf("figure %d", i+1)
		if !figureIs(fig.MIMEType, fig.Data) {
			// The type is what the code's _repr_ method claimed.
			notes = append(notes, fmt.Sprintf("%s is not shown: its bytes are not %s", name, fig.MIMEType))
			continue
		}
		content, notes = f.image(content, notes, name, fig.MIMEType, fig.Data)
	}
	if len(notes) > 0 {
		content = append(content, mcp.NewTextContent("["+strings.Join(notes, "; ")+"]"))
	}
	return kept, content
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

// image adds data as image content, or a note when it is past the limit.
func (f fileResults) image(content []mcp.Content, notes []string, name, mimeType string, data []byte) ([]mcp.Content, []string) {
	if f.imageLimit > 0 && int64(len(data)) > f.imageLimit {
		return content, append(notes, fmt.Sprintf("%s is not shown: it is %s, past the %s limit of images shown (--image-limit)",
			name, humanize.IBytes(uint64(len(data))), humanize.IBytes(uint64(f.imageLimit))))
	}
	return append(content, mcp.NewImageContent(base64.StdEncoding.EncodeToString(data), mimeType)), notes
}

// addFileResources serves the stored files: session://{id}/{path} for the
// files of Python sessions, call://{id}/{path} for those of fresh calls.
func addFileResources(s *server.MCPServer, store *filestore.Store, owners owners) {
	read := func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		e, data, err := store.Get(owners.of(ctx), req.Params.URI)
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
