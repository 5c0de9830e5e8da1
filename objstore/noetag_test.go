package objstore_test

import (
	"context"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/internal/testkit/s3test"
	"github.com/augloader/augloader/internal/testkit/testutil"
	"github.com/augloader/augloader/objstore"
)

// noETag is a proxy before the S3 server that drops the ETag from every
// answer about a shard (a store that keeps none, as s3proxy's filesystem
// backend for a file put there by hand) and keeps the headers of each
// GET (they are signed: the store below checks them as sent).
type noETag struct {
	target *url.URL
	mu     sync.Mutex
	gets   []http.Header
}

func (n *noETag) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := httputil.NewSingleHostReverseProxy(n.target)
	if strings.Contains(r.URL.Path, "/shard-") {
		if r.Method == http.MethodGet {
			n.mu.Lock()
			n.gets = append(n.gets, r.Header.Clone())
			n.mu.Unlock()
		}
		p.ModifyResponse = func(resp *http.Response) error {
			resp.Header.Del("ETag")
			return nil
		}
	}
	p.ServeHTTP(w, r)
}

// An object whose store gives no ETag is read If-Unmodified-Since its
// Last-Modified, never with an empty If-Match (which names no version: a
// store may refuse it or match anything).
func TestNoETagReadsIfUnmodifiedSince(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 60, 1, 256<<10)
	srv := s3test.Shared(t)
	srv.Upload(t, "noetag", "set", dir)
	target, _ := url.Parse(srv.Endpoint)
	proxy := &noETag{target: target}
	srv.Env(t, testutil.ServeHTTP(t, proxy))
	st, err := objstore.NewS3(context.Background(), "noetag", "set", objstore.S3Options{Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := readShard(t, st); err != nil {
		t.Fatal(err)
	}
	proxy.mu.Lock()
	defer proxy.mu.Unlock()
	if len(proxy.gets) == 0 {
		t.Fatal("no ranged GET of a shard reached the store")
	}
	for _, h := range proxy.gets {
		if _, ok := h["If-Match"]; ok {
			t.Errorf("a GET of an object without an ETag sent If-Match %q", h.Get("If-Match"))
		}
		since, err := http.ParseTime(h.Get("If-Unmodified-Since"))
		if err != nil || time.Since(since) > time.Hour || time.Until(since) > time.Minute {
			t.Errorf("a GET of an object without an ETag: If-Unmodified-Since %q, want its Last-Modified", h.Get("If-Unmodified-Since"))
		}
	}
}
