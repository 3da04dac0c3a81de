package packages

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode"

	"golang.org/x/net/html"
)

// Content types of the simple repository API (PEP 691).
const (
	simpleJSON   = "application/vnd.pypi.simple.v1+json"
	simpleAccept = simpleJSON + ", application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
)

// Size limits for what an index sends. maxPageFiles bounds the files one
// project page may list: a page past it is refused rather than held, as
// 64 MiB of minimal links made 4.5 million entries, 2 GiB of heap while
// parsing and 897 MiB kept.
const (
	maxPageSize  = 64 << 20
	maxPageFiles = 100_000
	maxWheelSize = 1 << 30
)

// errTooManyFiles is a project page listing more than maxPageFiles.
var errTooManyFiles = fmt.Errorf("lists more than %d files", maxPageFiles)

// Index is a client of a PyPI-style simple repository: an http(s) URL
// (e.g. ".../simple/") or a local directory laid out the same way
// (<dir>/<normalized-name>/index.json or index.html, next to the files or
// linking to them). It prefers the JSON API of PEP 691 and falls back to
// the HTML of PEP 503. An Index is safe for concurrent use.
type Index struct {
	base   *url.URL
	client *http.Client
}

// NewIndex returns a client for the index at location (a URL or a
// directory). client may be nil for a default one.
func NewIndex(location string, client *http.Client) (*Index, error) {
	base, err := parseLocation(location)
	if err != nil {
		return nil, fmt.Errorf("package index: %w", err)
	}
	if client == nil {
		client = newHTTPClient()
	}
	return &Index{base: base, client: client}, nil
}

// String returns the index location.
func (ix *Index) String() string { return sourceString(ix.base) }

// remote reports whether the index is reached over the network.
func (ix *Index) remote() bool { return ix.base.Scheme != "file" }

// Project is one project's page of an index.
type Project struct {
	// Name is the normalized project name.
	Name string `json:"name"`
	// Files are the files listed, in page order.
	Files []IndexFile `json:"files"`
}

// IndexFile is one file listed on a project page.
type IndexFile struct {
	// Filename is the file's name, e.g. "foo-1.0-py3-none-any.whl".
	Filename string `json:"filename"`
	// URL is where to get it: an http(s) URL or, for a local index, a path.
	URL string `json:"url"`
	// SHA256 is the hex sha256 the index gives, "" if none.
	SHA256 string `json:"sha256,omitempty"`
	// RequiresPython is the file's Requires-Python, "" if not given.
	RequiresPython string `json:"requires_python,omitempty"`
	// Yanked says the file was yanked (PEP 592).
	Yanked bool `json:"yanked,omitempty"`
	// YankedReason is the reason given for the yank, if any.
	YankedReason string `json:"yanked_reason,omitempty"`
	// MetadataURL is the PEP 658 core metadata file, "" when not offered.
	MetadataURL string `json:"metadata_url,omitempty"`
	// MetadataSHA256 is the metadata file's hex sha256, "" if not given.
	MetadataSHA256 string `json:"metadata_sha256,omitempty"`
	// Size is the file size in bytes, 0 if unknown.
	Size int64 `json:"size,omitempty"`
}

// Project fetches the page of project name (any spelling). A project the
// index does not have gives an error wrapping [ErrProjectNotFound]; an
// index that cannot be reached gives an [*UnreachableError].
func (ix *Index) Project(ctx context.Context, name string) (*Project, error) {
	norm := Normalize(name)
	if ix.remote() {
		page := ix.base.ResolveReference(&url.URL{Path: url.PathEscape(norm) + "/"})
		data, ctype, err := readAll(ctx, ix.client, page.String(), simpleAccept, maxPageSize)
		if err != nil {
			return nil, ix.pageError(norm, err)
		}
		if strings.Contains(ctype, "json") {
			return parseJSONPage(norm, page, data, true)
		}
		return parseHTMLPage(norm, page, data, true)
	}
	for _, f := range []string{"index.json", "index.html"} {
		page := ix.base.ResolveReference(&url.URL{Path: url.PathEscape(norm) + "/" + f})
		data, _, err := readAll(ctx, nil, sourceString(page), "", maxPageSize)
		if errors.Is(err, errNotFound) {
			continue
		}
		if err != nil {
			return nil, ix.pageError(norm, err)
		}
		if f == "index.json" {
			return parseJSONPage(norm, page, data, false)
		}
		return parseHTMLPage(norm, page, data, false)
	}
	return nil, ix.pageError(norm, errNotFound)
}

// ErrProjectNotFound is wrapped by the error of [Index.Project] when the
// index has no such project.
var ErrProjectNotFound = errors.New("project not found on the index")

func (ix *Index) pageError(name string, err error) error {
	if errors.Is(err, errNotFound) {
		return fmt.Errorf("%s at %s: %w", name, ix, ErrProjectNotFound)
	}
	if ue := (*UnreachableError)(nil); errors.As(err, &ue) {
		return err
	}
	return fmt.Errorf("index %s, project %s: %w", ix, name, err)
}

// resolveFileURL resolves a link on a page. Pages from the network may
// only link to http(s) files, never to local ones.
func resolveFileURL(page *url.URL, href string, remotePage bool) (string, error) {
	u, err := url.Parse(strings.TrimSpace(href))
	if err != nil {
		return "", err
	}
	u = page.ResolveReference(u)
	u.Fragment, u.RawFragment = "", ""
	switch u.Scheme {
	case "http", "https":
		return u.String(), nil
	case "file":
		if remotePage {
			return "", fmt.Errorf("a remote index may not link to local file %q", href)
		}
		return sourceString(u), nil
	}
	return "", fmt.Errorf("unsupported link %q", href)
}

// plainFilename checks that a listed file name can be used as a cache file
// name, and printed: fetch lists the files on a terminal, where a control
// character from the index (an escape sequence) would act.
func plainFilename(name string) bool {
	return name != "" && name != "." && name != ".." && len(name) <= maxFilename &&
		!strings.ContainsAny(name, "/\\") && !strings.ContainsFunc(name, unicode.IsControl)
}

// maxFilename is the longest file name most file systems take, in bytes.
const maxFilename = 255

// jsonFile is a file entry of a PEP 691 page.
type jsonFile struct {
	Filename         string            `json:"filename"`
	URL              string            `json:"url"`
	Hashes           map[string]string `json:"hashes"`
	RequiresPython   *string           `json:"requires-python"`
	Yanked           json.RawMessage   `json:"yanked"`
	CoreMetadata     json.RawMessage   `json:"core-metadata"`
	DistInfoMetadata json.RawMessage   `json:"dist-info-metadata"`
	Size             *int64            `json:"size"`
}

// parseJSONPage reads a PEP 691 page. Its files are decoded one at a time,
// so that a page of many small entries is refused at maxPageFiles rather
// than decoded whole first.
func parseJSONPage(name string, page *url.URL, data []byte, remote bool) (*Project, error) {
	p := &Project{Name: name}
	fail := func(err error) (*Project, error) { return nil, fmt.Errorf("project page %s: %w", page, err) }
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := expectDelim(dec, '{'); err != nil {
		return fail(err)
	}
	var meta struct {
		APIVersion string `json:"api-version"`
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return fail(err)
		}
		switch key {
		case "meta":
			err = dec.Decode(&meta)
		case "files":
			err = decodeEach(dec, func(jf *jsonFile) error {
				if len(p.Files) == maxPageFiles {
					return errTooManyFiles
				}
				if f, ok := jf.indexFile(page, remote); ok {
					p.Files = append(p.Files, f)
				}
				return nil
			})
		default:
			err = dec.Decode(new(json.RawMessage))
		}
		if err != nil {
			return fail(err)
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return fail(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fail(errors.New("more after the page's object"))
	}
	if v := meta.APIVersion; v != "" && !strings.HasPrefix(v, "1.") && v != "1" {
		return nil, fmt.Errorf("project page %s: unsupported API version %q", page, v)
	}
	return p, nil
}

// expectDelim reads the delimiter want from dec.
func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != want {
		return fmt.Errorf("want %v, found %v", want, tok)
	}
	return nil
}

// decodeEach decodes the elements of the JSON array next in dec, one at a
// time, into a fresh jsonFile each, and hands each to f.
func decodeEach(dec *json.Decoder, f func(*jsonFile) error) error {
	if err := expectDelim(dec, '['); err != nil {
		return err
	}
	for dec.More() {
		var jf jsonFile
		if err := dec.Decode(&jf); err != nil {
			return err
		}
		if err := f(&jf); err != nil {
			return err
		}
	}
	return expectDelim(dec, ']')
}

// indexFile is jf as an IndexFile, and whether it is one: a file whose
// name or link cannot be used is left out.
func (jf *jsonFile) indexFile(page *url.URL, remote bool) (IndexFile, bool) {
	if !plainFilename(jf.Filename) {
		return IndexFile{}, false
	}
	src, err := resolveFileURL(page, jf.URL, remote)
	if err != nil {
		return IndexFile{}, false
	}
	f := IndexFile{Filename: jf.Filename, URL: src, SHA256: strings.ToLower(jf.Hashes["sha256"])}
	if jf.RequiresPython != nil {
		f.RequiresPython = *jf.RequiresPython
	}
	if jf.Size != nil {
		f.Size = *jf.Size
	}
	var yanked any
	if len(jf.Yanked) > 0 && json.Unmarshal(jf.Yanked, &yanked) == nil {
		switch y := yanked.(type) {
		case bool:
			f.Yanked = y
		case string:
			f.Yanked, f.YankedReason = true, y
		}
	}
	meta := jf.CoreMetadata
	if len(meta) == 0 {
		meta = jf.DistInfoMetadata
	}
	var m any
	if len(meta) > 0 && json.Unmarshal(meta, &m) == nil {
		switch mv := m.(type) {
		case bool:
			if mv {
				f.MetadataURL = src + ".metadata"
			}
		case map[string]any:
			f.MetadataURL = src + ".metadata"
			if h, ok := mv["sha256"].(string); ok {
				f.MetadataSHA256 = strings.ToLower(h)
			}
		}
	}
	return f, true
}

func parseHTMLPage(name string, page *url.URL, data []byte, remote bool) (*Project, error) {
	p := &Project{Name: name}
	z := html.NewTokenizer(bytes.NewReader(data))
	base := page
	var cur map[string]string // attributes of the open <a>, nil outside one
	var text strings.Builder
	finish := func() {
		href, ok := cur["href"]
		if !ok {
			return
		}
		src, err := resolveFileURL(base, href, remote)
		if err != nil {
			return
		}
		filename := strings.TrimSpace(text.String())
		if filename == "" {
			u, _ := url.Parse(href)
			if u != nil {
				filename, _ = url.PathUnescape(u.Path[strings.LastIndex(u.Path, "/")+1:])
			}
		}
		if !plainFilename(filename) {
			return
		}
		f := IndexFile{Filename: filename, URL: src, RequiresPython: cur["data-requires-python"]}
		if u, err := url.Parse(href); err == nil {
			if algo, hash, ok := strings.Cut(u.Fragment, "="); ok && algo == "sha256" {
				f.SHA256 = strings.ToLower(hash)
			}
		}
		if reason, ok := cur["data-yanked"]; ok {
			f.Yanked, f.YankedReason = true, reason
		}
		meta, ok := cur["data-core-metadata"]
		if !ok {
			meta, ok = cur["data-dist-info-metadata"]
		}
		if ok && meta != "false" {
			f.MetadataURL = src + ".metadata"
			if algo, hash, ok := strings.Cut(meta, "="); ok && algo == "sha256" {
				f.MetadataSHA256 = strings.ToLower(hash)
			}
		}
		p.Files = append(p.Files, f)
	}
	for {
		switch z.Next() {
		case html.ErrorToken:
			if err := z.Err(); err != io.EOF {
				return nil, fmt.Errorf("project page %s: %w", page, err)
			}
			if cur != nil {
				finish()
			}
			return p, nil
		case html.StartTagToken, html.SelfClosingTagToken:
			tn, hasAttr := z.TagName()
			if string(tn) != "a" && string(tn) != "base" {
				continue // no attributes kept for tags that do not matter
			}
			if len(p.Files) >= maxPageFiles {
				return nil, fmt.Errorf("project page %s: %w", page, errTooManyFiles)
			}
			attrs := map[string]string{}
			for hasAttr {
				var k, v []byte
				k, v, hasAttr = z.TagAttr()
				attrs[string(k)] = string(v)
			}
			switch string(tn) {
			case "a":
				if cur != nil {
					finish()
				}
				cur = attrs
				text.Reset()
			case "base":
				if h, ok := attrs["href"]; ok {
					if u, err := url.Parse(h); err == nil {
						base = page.ResolveReference(u)
					}
				}
			}
		case html.TextToken:
			if cur != nil {
				text.Write(z.Text())
			}
		case html.EndTagToken:
			if tn, _ := z.TagName(); string(tn) == "a" && cur != nil {
				finish()
				cur = nil
			}
		}
	}
}

// Metadata returns the core metadata of a wheel listed on the index: the
// PEP 658 metadata file when the index offers one (checked against its
// sha256 when given), else the METADATA inside the wheel, which is then
// downloaded into memory and checked against the file's sha256.
func (ix *Index) Metadata(ctx context.Context, f IndexFile) (*Metadata, error) {
	if f.MetadataURL != "" {
		md, err := ix.coreMetadata(ctx, f)
		if err == nil {
			return md, nil
		}
		if !errors.Is(err, errNotFound) {
			return nil, err
		}
		// A metadata file announced but missing: fall back to the wheel.
	}
	data, err := fetchVerified(ctx, ix.client, f.URL, f.SHA256, f.Size, maxWheelSize)
	if err != nil {
		return nil, err
	}
	return wheelMetadata(bytes.NewReader(data), int64(len(data)), Normalize(nameOfFile(f.Filename)))
}

func (ix *Index) coreMetadata(ctx context.Context, f IndexFile) (*Metadata, error) {
	data, _, err := readAll(ctx, ix.client, f.MetadataURL, "", maxMetadataSize)
	if err != nil {
		return nil, err
	}
	if f.MetadataSHA256 != "" {
		if got := sha256Hex(data); got != f.MetadataSHA256 {
			return nil, &hashError{file: f.Filename + ".metadata", want: f.MetadataSHA256, got: got}
		}
	}
	md, err := parseMetadata(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.MetadataURL, err)
	}
	return md, nil
}

// nameOfFile returns the distribution name part of a wheel or sdist name.
func nameOfFile(filename string) string {
	name, _, _ := strings.Cut(filename, "-")
	return name
}
