package mcpserver

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mcp-run-python/mcp-run-python/cmd/mcp-run-python/internal/filestore"
	"github.com/mcp-run-python/mcp-run-python/supervisor"
)

// pngBytes are the first bytes of a PNG: what sniffing needs.
const pngBytes = "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"

// The files and figures of a call come from the sandbox: however many it
// sends, the result shows at most maxImages images, an SVG only as a link,
// and says what it left out in one short note, logged once.
func TestKeepBoundsWhatAResultShows(t *testing.T) {
	store, err := filestore.Open(filestore.Config{Dir: t.TempDir(), MaxBytes: 1 << 20, MaxFiles: 3, TTL: time.Hour}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	core, logs := observer.New(zap.WarnLevel)
	f := fileResults{store: store, imageLimit: 1 << 20, log: zap.New(core)}

	var res supervisor.Result
	res.Figures = append(res.Figures, supervisor.Figure{MIMEType: "image/svg+xml", Data: []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`)})
	for range 200 {
		res.Figures = append(res.Figures, supervisor.Figure{MIMEType: "image/png", Data: []byte(pngBytes)})
	}
	for range 100 {
		res.Figures = append(res.Figures, supervisor.Figure{MIMEType: "image/jpeg", Data: []byte(pngBytes)})
	}
	for i := range 100 {
		res.Files = append(res.Files, supervisor.File{Path: fmt.Sprintf("f%03d.txt", i), Data: []byte("x"), Size: 1})
	}
	kept, content := f.keep("", filestore.NewCallScope(), res)

	var links, images, texts int
	var svg mcp.ResourceLink
	var note string
	for _, c := range content {
		switch c := c.(type) {
		case mcp.ResourceLink:
			links++
			if strings.HasSuffix(c.URI, ".svg") {
				svg = c
			}
		case mcp.ImageContent:
			images++
			if c.MIMEType != "image/png" {
				t.Errorf("image content of type %s", c.MIMEType)
			}
		case mcp.TextContent:
			texts++
			note = c.Text
		}
	}
	// The store keeps 3 files: 3 text files, and the SVG figure is refused.
	if links != 3 || len(kept) != 3 || images != maxImages || texts != 1 {
		t.Errorf("%d links, %d kept, %d images, %d notes; want 3, 3, %d, 1", links, len(kept), images, texts, maxImages)
	}
	if svg.URI != "" {
		t.Errorf("the SVG figure was linked though the store is full: %+v", svg)
	}
	for _, want := range []string{"180 more images are not shown: a result shows at most 20", "f003.txt, f004.txt, f005.txt, f006.txt, f007.txt and 93 more not kept: file store full",
		"figure 202, figure 203, figure 204, figure 205, figure 206 and 95 more are not shown: their bytes are not image/jpeg"} {
		if !strings.Contains(note, want) {
			t.Errorf("the note lacks %q: %s", want, note)
		}
	}
	if len(note) > 2048 {
		t.Errorf("the note is %d bytes long", len(note))
	}
	if n := logs.Len(); n != 1 {
		t.Errorf("%d warnings logged, want 1", n)
	}
}

// An SVG figure may carry scripts: it is linked, never image content.
func TestKeepLinksSVGFigures(t *testing.T) {
	store, err := filestore.Open(filestore.Config{Dir: t.TempDir(), MaxBytes: 1 << 20, TTL: time.Hour}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	f := fileResults{store: store, imageLimit: 1 << 20, log: zap.NewNop()}
	svg := `<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`
	res := supervisor.Result{Figures: []supervisor.Figure{{MIMEType: "image/svg+xml", Data: []byte(svg)}}}
	kept, content := f.keep("", filestore.NewCallScope(), res)
	if len(content) != 1 || len(kept) != 1 {
		t.Fatalf("content %#v, kept %v; want one link", content, kept)
	}
	link, ok := content[0].(mcp.ResourceLink)
	if !ok || link.MIMEType != "image/svg+xml" || !strings.HasSuffix(link.URI, "/.figures/figure-1.svg") {
		t.Fatalf("content %#v, want a link to the SVG", content[0])
	}
	e, data, err := store.Get("", link.URI)
	if err != nil || string(data) != svg || e.MIMEType != "image/svg+xml" {
		t.Errorf("Get(%s) = %+v, %q, %v", link.URI, e, data, err)
	}
}
