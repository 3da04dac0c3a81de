package packages

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// DefaultIndexURL is PyPI's simple API, the default package index.
const DefaultIndexURL = "https://pypi.org/simple/"

// PyodideHostURL returns where the packages of a Pyodide release are
// published, the host Pyodide's own loadPackage falls back to.
func PyodideHostURL(version string) string {
	return "https://cdn.jsdelivr.net/pyodide/v" + version + "/full/"
}

// CheckLocation reports whether s can serve as an index or package host:
// an http(s) URL, a file:// URL or a local directory.
func CheckLocation(s string) error {
	_, err := parseLocation(s)
	return err
}

// errNotFound marks a file or page that does not exist (HTTP 404/410 or a
// missing local file). It is a sentinel, never mutated.
var errNotFound = errors.New("not found")

// parseLocation turns an index or package host given as an http(s) URL, a
// file:// URL or a local directory path into a base URL whose path ends in
// "/". Local directories become file:// URLs with absolute paths, so that
// relative links in index pages resolve the same way for both.
func parseLocation(s string) (*url.URL, error) {
	if s == "" {
		return nil, fmt.Errorf("empty location")
	}
	var u *url.URL
	switch {
	case strings.HasPrefix(s, "http://"), strings.HasPrefix(s, "https://"), strings.HasPrefix(s, "file://"):
		var err error
		if u, err = url.Parse(s); err != nil {
			return nil, fmt.Errorf("invalid location %q: %w", s, err)
		}
		if u.Scheme == "file" && ((u.Host != "" && u.Host != "localhost") || !filepath.IsAbs(localPath(u))) {
			return nil, fmt.Errorf("invalid location %q: file URLs need an absolute local path", s)
		}
		if u.Scheme == "file" {
			u.Host = ""
		}
	case strings.Contains(s, "://"):
		return nil, fmt.Errorf("invalid location %q: only http, https and file URLs or directories are supported", s)
	default:
		abs, err := filepath.Abs(s)
		if err != nil {
			return nil, fmt.Errorf("invalid location %q: %w", s, err)
		}
		path := filepath.ToSlash(abs)
		if !strings.HasPrefix(path, "/") {
			path = "/" + path // C:/dir on Windows: the URL is file:///C:/dir
		}
		u = &url.URL{Scheme: "file", Path: path}
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
		u.RawPath = ""
	}
	return u, nil
}

// sourceString turns a resolved URL into what a PlanFile names as its
// source: the URL itself for http(s), a local path for file URLs.
func sourceString(u *url.URL) string {
	if u.Scheme == "file" {
		return localPath(u)
	}
	return u.String()
}

// localPath is the local path of a file URL. A Windows path's URL is
// file:///C:/dir, whose path /C:/dir names no file there.
func localPath(u *url.URL) string {
	p := filepath.FromSlash(u.Path)
	if len(p) > 1 && filepath.VolumeName(p[1:]) != "" {
		return p[1:]
	}
	return p
}

// isRemote reports whether a source string is an http(s) URL.
func isRemote(src string) bool {
	return strings.HasPrefix(src, "http://") || strings.HasPrefix(src, "https://")
}

// open opens a source (an http(s) URL or a local path) for reading, with
// accept as the Accept header for HTTP. It returns the body, its
// Content-Type (HTTP only) and its length, or -1 when unknown. A missing
// file or page wraps errNotFound; a connection failure or server error is
// an *UnreachableError.
func open(ctx context.Context, client *http.Client, src, accept string) (io.ReadCloser, string, int64, error) {
	if !isRemote(src) {
		f, err := os.Open(src)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, "", 0, fmt.Errorf("%s: %w", src, errNotFound)
			}
			return nil, "", 0, err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, "", 0, err
		}
		if st.IsDir() {
			f.Close()
			return nil, "", 0, fmt.Errorf("%s is a directory: %w", src, errNotFound)
		}
		return &ctxReader{ctx: ctx, r: f}, "", st.Size(), nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return nil, "", 0, err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", 0, ctx.Err()
		}
		// The *url.Error would repeat the method and URL.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, "", 0, &UnreachableError{URL: src, Err: err}
	}
	switch {
	case resp.StatusCode == http.StatusOK:
		return resp.Body, resp.Header.Get("Content-Type"), resp.ContentLength, nil
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		resp.Body.Close()
		return nil, "", 0, fmt.Errorf("%s: HTTP status %d: %w", src, resp.StatusCode, errNotFound)
	default:
		resp.Body.Close()
		return nil, "", 0, &UnreachableError{URL: src, Status: resp.StatusCode}
	}
}

// readAll reads a whole source, at most limit bytes.
func readAll(ctx context.Context, client *http.Client, src, accept string, limit int64) ([]byte, string, error) {
	rc, ctype, _, err := open(ctx, client, src, accept)
	if err != nil {
		return nil, "", err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		if isRemote(src) {
			return nil, "", &UnreachableError{URL: src, Err: err}
		}
		return nil, "", err
	}
	if int64(len(data)) > limit {
		return nil, "", fmt.Errorf("%s is larger than %d bytes", src, limit)
	}
	return data, ctype, nil
}

// ctxReader stops a local file copy when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.ReadCloser
}

// Read reads unless the context has ended.
func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// Close closes the file.
func (c *ctxReader) Close() error { return c.r.Close() }

// newHTTPClient returns the client used when none is configured: no
// overall timeout (contexts bound each call), but bounded connection setup.
func newHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	return &http.Client{Transport: t}
}
