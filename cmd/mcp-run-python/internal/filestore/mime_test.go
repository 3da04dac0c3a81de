package filestore

import "testing"

const (
	pngBytes  = "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
	jpegBytes = "\xff\xd8\xff\xe0\x00\x10JFIF"
	gifBytes  = "GIF89a\x01\x00\x01\x00"
	webpBytes = "RIFF\x24\x00\x00\x00WEBPVP8 "
)

func TestMIMEType(t *testing.T) {
	tests := []struct {
		path, data, want string
	}{
		{"plot.png", pngBytes, "image/png"},
		{"photo.JPG", jpegBytes, "image/jpeg"},
		{"photo.jpeg", jpegBytes, "image/jpeg"},
		{"anim.gif", gifBytes, "image/gif"},
		{"pic.webp", webpBytes, "image/webp"},
		// An image's type is what its bytes show, whatever its name says.
		{"misnamed.jpg", pngBytes, "image/png"},
		{"fake.png", "hello", "text/plain; charset=utf-8"},
		{"empty.png", "", "text/plain; charset=utf-8"},
		{"noext", pngBytes, "image/png"},
		{"chart.svg", "<svg/>", "image/svg+xml"},
		{"out/data.csv", "a,b\n1,2\n", "text/csv"},
		{"data.tsv", "a\tb\n", "text/tab-separated-values"},
		{"notes.txt", "hi", "text/plain"},
		{"README.MD", "# hi", "text/markdown"},
		{"page.html", "<p>", "text/html"},
		{"result.json", "{}", "application/json"},
		{"doc.pdf", "%PDF-1.7", "application/pdf"},
		{"a.zip", "PK\x03\x04", "application/zip"},
		{"t.parquet", "PAR1", "application/vnd.apache.parquet"},
		{"script.py", "print(1)", "text/x-python"},
		{"feed.xml", "<a/>", "application/xml"},
		{"unknown.xyz", "plain words", "text/plain; charset=utf-8"},
		{"blob", "\x00\x01\x02\x03", "application/octet-stream"},
		// Sniffed HTML is served as text: only a name says a file is HTML.
		{"dir.png/file", "<html><body>", "text/plain; charset=utf-8"},
		{"page.png", "<!DOCTYPE html><script>alert(1)</script>", "text/plain; charset=utf-8"},
		{"noext", "<html><script>alert(1)</script>", "text/plain; charset=utf-8"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			if got := mimeType(tt.path, []byte(tt.data)); got != tt.want {
				t.Errorf("mimeType(%q) = %q, want %q", tt.path, got, tt.want)
			}
		})
	}
}

func TestIsImage(t *testing.T) {
	tests := []struct {
		mime string
		want bool
	}{
		{"image/png", true},
		{"image/jpeg", true},
		{"image/gif", true},
		{"image/webp", true},
		{"IMAGE/PNG", true},
		{"image/png; foo=bar", true},
		{"image/svg+xml", false},
		{"image/bmp", false},
		{"text/plain", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := IsImage(tt.mime); got != tt.want {
			t.Errorf("IsImage(%q) = %v, want %v", tt.mime, got, tt.want)
		}
	}
}
