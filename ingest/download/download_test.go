package download_test

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/augloader/augloader/ingest/convert"
	"github.com/augloader/augloader/ingest/download"
	"github.com/augloader/augloader/internal/testkit/testutil"
)

// makeZip zips the tiny fixture as NAME/NAME_*.txt, as TU publishes it.
func makeZip(t *testing.T, name string) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	src := testutil.Testdata(t, "tu", "TINY")
	entries, _ := os.ReadDir(src)
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(src, e.Name()))
		w, _ := zw.Create(name + "/" + strings.Replace(e.Name(), "TINY", name, 1))
		w.Write(b)
	}
	zw.Close()
	return buf.Bytes()
}

func TestFetchAndConvert(t *testing.T) {
	body := makeZip(t, "FAKE")
	sum := sha256.Sum256(body)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/data/FAKE.zip":
			w.Write(body)
		case "/data/BROKEN.zip":
			w.Write(body[:len(body)/2])
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	cache := t.TempDir()
	opts := download.Options{Name: "FAKE", BaseURL: srv.URL + "/data", Cache: cache, SHA256: hex.EncodeToString(sum[:])}
	p, err := download.Fetch(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	// Cached: a second fetch makes no request.
	if _, err := download.Fetch(context.Background(), opts); err != nil || hits.Load() != 1 {
		t.Fatalf("second fetch: %v, %d requests", err, hits.Load())
	}
	res, err := convert.Run(context.Background(), convert.Options{Input: p, Out: filepath.Join(t.TempDir(), "s")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Manifest.Dataset != "FAKE" || res.Manifest.Stats.Graphs != 3 {
		t.Fatalf("converted %s with %d graphs", res.Manifest.Dataset, res.Manifest.Stats.Graphs)
	}

	for _, c := range []struct {
		name string
		o    download.Options
		want string
	}{
		{"wrong sha", download.Options{Name: "FAKE", BaseURL: srv.URL + "/data", Cache: t.TempDir(), SHA256: strings.Repeat("0", 64)}, "sha256"},
		{"truncated zip", download.Options{Name: "BROKEN", BaseURL: srv.URL + "/data", Cache: t.TempDir()}, "not a zip"},
		{"missing", download.Options{Name: "NOPE", BaseURL: srv.URL + "/data", Cache: t.TempDir()}, "404"},
		{"bad name", download.Options{Name: "../etc", BaseURL: srv.URL, Cache: t.TempDir()}, "not a dataset name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := download.Fetch(context.Background(), c.o)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
			if entries, _ := os.ReadDir(c.o.Cache); len(entries) != 0 {
				t.Fatalf("cache holds %s after a failed download", entries[0].Name())
			}
		})
	}
}
