package objstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/internal/testkit/s3test"
	"github.com/augloader/augloader/internal/testkit/testutil"
	"github.com/augloader/augloader/objstore"
	"github.com/augloader/augloader/shard"
)

// liar is a proxy before the S3 server whose answers to ranged GETs of
// shard files are changed by lie; every other request goes through.
type liar struct {
	target *url.URL
	lie    func(w http.ResponseWriter, r *http.Request, p *httputil.ReverseProxy) bool
}

func (l *liar) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := httputil.NewSingleHostReverseProxy(l.target)
	if r.Method == http.MethodGet && r.Header.Get("Range") != "" && strings.Contains(r.URL.Path, "/shard-") && l.lie(w, r, p) {
		return
	}
	p.ServeHTTP(w, r)
}

// readShard opens the folder's first shard through st and reads 64
// bytes of it at 1000, returning the error.
func readShard(t *testing.T, st *objstore.S3) error {
	t.Helper()
	return readShardCtx(t, context.Background(), st)
}

// readShardCtx is readShard with the read under ctx.
func readShardCtx(t *testing.T, ctx context.Context, st *objstore.S3) error {
	t.Helper()
	man, err := shard.ReadManifestStore(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	f, err := st.Open(context.Background(), man.Shards[0].File)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = f.ReadAt(ctx, make([]byte, 64), 1000)
	return err
}

// A ranged GET must be answered with the range asked (206 and its
// Content-Range): a 200 with the whole object, or another range, is
// refused at once naming what was asked and answered, not taken and
// caught later as a changed file. A redirect is not followed, and the
// request's signature never reaches where it points.
func TestS3Answers(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 60, 1, 256<<10)
	srv := s3test.Shared(t)
	srv.Upload(t, "answers", "set", dir)
	target, _ := url.Parse(srv.Endpoint)

	var elsewhere atomic.Int64 // requests that reached the redirect's target
	other := testutil.ServeHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			elsewhere.Add(1)
		}
		w.WriteHeader(http.StatusOK)
	}))
	for _, tc := range []struct {
		name, want string
		lie        func(w http.ResponseWriter, r *http.Request, p *httputil.ReverseProxy) bool
	}{
		{"range ignored", "without a Content-Range", func(w http.ResponseWriter, r *http.Request, p *httputil.ReverseProxy) bool {
			p.ModifyResponse = func(resp *http.Response) error { // a 200, as if the Range were not read
				resp.StatusCode, resp.Status = http.StatusOK, "200 OK"
				resp.Header.Del("Content-Range")
				return nil
			}
			p.ServeHTTP(w, r)
			return true
		}},
		{"another range", "answered \"bytes 1001-", func(w http.ResponseWriter, r *http.Request, p *httputil.ReverseProxy) bool {
			p.ModifyResponse = func(resp *http.Response) error {
				var a, b, n int64
				fmt.Sscanf(resp.Header.Get("Content-Range"), "bytes %d-%d/%d", &a, &b, &n)
				resp.Header.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", a+1, b+1, n))
				return nil
			}
			p.ServeHTTP(w, r)
			return true
		}},
		{"redirect", "a redirect to " + other, func(w http.ResponseWriter, r *http.Request, _ *httputil.ReverseProxy) bool {
			http.Redirect(w, r, other+r.URL.RequestURI(), http.StatusTemporaryRedirect)
			return true
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv.Env(t, testutil.ServeHTTP(t, &liar{target: target, lie: tc.lie}))
			st, err := objstore.NewS3(context.Background(), "answers", "set", objstore.S3Options{Backoff: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			err = readShard(t, st)
			if !errors.Is(err, objstore.ErrAnswer) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "s3://answers/set/shard-") {
				t.Fatalf("want ErrAnswer naming the object and %q, got %v", tc.want, err)
			}
			if r := st.Stats().Retries.Load(); r != 0 {
				t.Fatalf("%d retries of an answer no S3 store gives", r)
			}
			if n := elsewhere.Load(); n != 0 {
				t.Fatalf("%d signed requests reached the redirect's target", n)
			}
		})
	}
}

// A store that sends a GET's headers and then nothing: each try ends
// after the idle timeout, the read after the request timeout with an
// error that says so; and Close ends a read waiting on it at once.
func TestS3Stalls(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 60, 1, 256<<10)
	srv := s3test.Shared(t)
	srv.Upload(t, "stalls", "set", dir)
	target, _ := url.Parse(srv.Endpoint)
	stall := &liar{target: target, lie: func(w http.ResponseWriter, r *http.Request, p *httputil.ReverseProxy) bool {
		p.ModifyResponse = func(resp *http.Response) error { // the store's headers, then not a byte
			resp.Body = stalled{r.Context()}
			return nil
		}
		p.FlushInterval = -1
		p.ServeHTTP(w, r)
		return true
	}}
	srv.Env(t, testutil.ServeHTTP(t, stall))

	t.Run("timeout", func(t *testing.T) {
		st, err := objstore.NewS3(context.Background(), "stalls", "set", objstore.S3Options{
			IdleTimeout: 200 * time.Millisecond, RequestTimeout: 2 * time.Second, Backoff: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		err = readShard(t, st)
		took := time.Since(t0)
		if !errors.Is(err, objstore.ErrRead) || !strings.Contains(err.Error(), "no byte received") || !strings.Contains(err.Error(), "s3://stalls/set/shard-") {
			t.Fatalf("want ErrRead naming the object and the stall, got %v", err)
		}
		if took > 10*time.Second {
			t.Fatalf("the stalled read took %s against a request timeout of 2 s", took)
		}
		if st.Stats().Retries.Load() == 0 {
			t.Fatal("no try ended at the idle timeout")
		}
	})
	t.Run("close", func(t *testing.T) {
		st, err := objstore.NewS3(context.Background(), "stalls", "set", objstore.S3Options{})
		if err != nil {
			t.Fatal(err)
		}
		time.AfterFunc(500*time.Millisecond, func() { st.Close() })
		t0 := time.Now()
		err = readShard(t, st)
		if !errors.Is(err, objstore.ErrClosed) || time.Since(t0) > 5*time.Second {
			t.Fatalf("a read of a closed store: want ErrClosed at once, got %v after %s", err, time.Since(t0))
		}
	})
	t.Run("ctx", func(t *testing.T) {
		st, err := objstore.NewS3(context.Background(), "stalls", "set", objstore.S3Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(500*time.Millisecond, cancel)
		t0 := time.Now()
		err = readShardCtx(t, ctx, st)
		if !errors.Is(err, context.Canceled) || time.Since(t0) > 5*time.Second {
			t.Fatalf("a read whose ctx ended: want context.Canceled at once, got %v after %s", err, time.Since(t0))
		}
	})
}

// stalled is a body that gives no byte until its request ends.
type stalled struct{ ctx context.Context }

func (s stalled) Read([]byte) (int, error) {
	<-s.ctx.Done()
	return 0, s.ctx.Err()
}

func (s stalled) Close() error { return nil }
