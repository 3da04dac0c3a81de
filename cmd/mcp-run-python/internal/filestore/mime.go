package filestore

import (
	"net/http"
	"path"
	"strings"
)

// mimeTypes maps the extensions of common files to their type. It is ours,
// not mime.TypeByExtension's, which reads the system's tables and so
// answers differently from one machine to the next.
var mimeTypes = map[string]string{
	".png":     "image/png",
	".jpg":     "image/jpeg",
	".jpeg":    "image/jpeg",
	".gif":     "image/gif",
	".webp":    "image/webp",
	".svg":     "image/svg+xml",
	".csv":     "text/csv",
	".tsv":     "text/tab-separated-values",
	".txt":     "text/plain",
	".log":     "text/plain",
	".md":      "text/markdown",
	".html":    "text/html",
	".htm":     "text/html",
	".css":     "text/css",
	".js":      "text/javascript",
	".py":      "text/x-python",
	".json":    "application/json",
	".xml":     "application/xml",
	".yaml":    "application/yaml",
	".yml":     "application/yaml",
	".pdf":     "application/pdf",
	".zip":     "application/zip",
	".gz":      "application/gzip",
	".tar":     "application/x-tar",
	".parquet": "application/vnd.apache.parquet",
	".xlsx":    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
}

// mimeType is the type of the file at path p holding data: by its extension
// for common files, else by its first bytes. Clients decode what is sent as
// an image, and some reject a whole conversation over one that is not what
// it says, so an image's type is always the one its bytes show. A type
// found by sniffing is never HTML: a document a client may render, with
// its scripts, is served as one only when its name says so; sniffed HTML
// is served as the text it is.
func mimeType(p string, data []byte) string {
	t, ok := mimeTypes[strings.ToLower(path.Ext(p))]
	if !ok || IsImage(t) {
		t = http.DetectContentType(data)
		if base, _, _ := strings.Cut(t, ";"); base == "text/html" {
			t = "text/plain; charset=utf-8"
		}
	}
	return t
}

// IsImage reports whether a file of type mimeType can go to clients as
// image content: PNG, JPEG, GIF or WebP. SVG is not, as it is a document
// that may carry scripts.
func IsImage(mimeType string) bool {
	t, _, _ := strings.Cut(mimeType, ";")
	switch strings.ToLower(strings.TrimSpace(t)) {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return true
	}
	return false
}
