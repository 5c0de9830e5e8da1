package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/ingest/convert"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/internal/testkit/s3test"
	"github.com/augloader/augloader/internal/testkit/testutil"
	"github.com/augloader/augloader/loader"
	"github.com/augloader/augloader/objstore"
	"github.com/augloader/augloader/shard"
	"github.com/augloader/augloader/wire"
)

func TestMain(m *testing.M) { fixture.Main(m) }

const policy = "0..|nodesam:1"

// epochBytes serves one epoch (or its tail from startBatch) of the folder
// at location and returns the stream's bytes.
func epochBytes(t *testing.T, location string, sh epoch.Shuffle, limit int64, startBatch int) []byte {
	t.Helper()
	b, err := epochStream(t, location, sh, limit, startBatch)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// epochStream is epochBytes with the stream's error returned.
func epochStream(t *testing.T, location string, sh epoch.Shuffle, limit int64, startBatch int) ([]byte, error) {
	t.Helper()
	st, err := objstore.Resolve(context.Background(), location)
	if err != nil {
		t.Fatal(err)
	}
	return storeStream(t, st, sh, limit, startBatch)
}

// storeStream is epochStream reading the folder of store st.
func storeStream(t *testing.T, st shard.Store, sh epoch.Shuffle, limit int64, startBatch int) ([]byte, error) {
	t.Helper()
	ctx := context.Background()
	var opts []shard.Option
	if limit > 0 {
		opts = append(opts, shard.WithCacheLimit(limit))
	}
	r, err := shard.OpenStore(ctx, st, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	src, err := loader.NewSource(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	sched, err := epoch.ParseSchedule(policy)
	if err != nil {
		t.Fatal(err)
	}
	l, err := loader.New(src, loader.Config{Workers: 2, Seed: 3, BatchSize: 16, Shuffle: sh, Schedule: sched})
	if err != nil {
		t.Fatal(err)
	}
	p, err := l.Plan(wire.Request{Epoch: 2, World: 1, StartBatch: startBatch})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_, err = l.WriteStream(ctx, p, &buf)
	return buf.Bytes(), err
}

// An epoch served from s3:// is the same bytes as from the local folder,
// in each shuffle, with and without a cache limit, and resumed midway.
func TestS3SameBytes(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 240, 2, 256<<10)
	srv := s3test.Shared(t)
	loc := srv.Upload(t, "shards", "collab/v1", dir)
	for _, sh := range []epoch.Shuffle{{}, {Window: 4}} {
		for _, limit := range []int64{0, 1 << 20} {
			for _, start := range []int{0, 5} {
				t.Run(fmt.Sprintf("%s/limit=%d/start=%d", sh, limit, start), func(t *testing.T) {
					want := epochBytes(t, dir, sh, limit, start)
					if got := epochBytes(t, loc, sh, limit, start); !bytes.Equal(got, want) {
						t.Fatalf("%s: %d bytes differ from the local folder's %d", loc, len(got), len(want))
					}
				})
			}
		}
	}
}

// faults is a proxy before the S3 server that cuts the body of every
// cutEvery-th GET midway, answers every slowEvery-th request 503
// SlowDown, drops the connection of every resetEvery-th before a byte of
// its response (headers included), holds every stallEvery-th for stall
// before answering, and adds delay to each.
type faults struct {
	target                                     *url.URL
	cutEvery, slowDown, resetEvery, stallEvery int64
	stall                                      time.Duration
	n                                          atomic.Int64
	delay                                      time.Duration
	// at, when set, is told each request's number first.
	at func(n int64)
	// flip, when set, is asked of each ranged GET: true flips one byte in
	// the middle of its body (the status, headers and ETag the store's).
	flip func(n int64, r *http.Request) bool
}

func (f *faults) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := f.n.Add(1)
	if f.at != nil {
		f.at(n)
	}
	time.Sleep(f.delay)
	if f.resetEvery > 0 && n%f.resetEvery == 0 {
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.(*net.TCPConn).SetLinger(0) // a reset, not a clean close
				c.Close()
				return
			}
		}
	}
	if f.stallEvery > 0 && n%f.stallEvery == 0 {
		select {
		case <-time.After(f.stall):
		case <-r.Context().Done():
			return
		}
	}
	if f.slowDown > 0 && n%f.slowDown == 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
		return
	}
	p := httputil.NewSingleHostReverseProxy(f.target)
	if f.flip != nil && r.Method == http.MethodGet && r.Header.Get("Range") != "" && f.flip(n, r) {
		p.ModifyResponse = func(resp *http.Response) error {
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return err
			}
			if len(b) > 0 {
				b[len(b)/2] ^= 0x20
			}
			resp.Body = io.NopCloser(bytes.NewReader(b))
			return nil
		}
	}
	if f.cutEvery > 0 && n%f.cutEvery == 0 && r.Method == http.MethodGet && r.Header.Get("Range") != "" {
		p.ModifyResponse = func(resp *http.Response) error {
			resp.Body = &cutBody{ReadCloser: resp.Body, left: 100}
			return nil
		}
		p.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
			// The cut: drop the connection mid-body.
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					c.Close()
				}
			}
		}
	}
	p.ServeHTTP(w, r)
}

// cutBody ends with an error after left bytes.
type cutBody struct {
	io.ReadCloser
	left int
}

func (c *cutBody) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errors.New("cut")
	}
	p = p[:min(len(p), c.left)]
	n, err := c.ReadCloser.Read(p)
	c.left -= n
	return n, err
}

// Under injected faults (bodies cut midway, 503 SlowDown, latency) the
// bytes are the same, the reads retried; past the attempts the error
// names the object, the range and the last status; an object replaced
// under a reader is refused, naming it.
func TestS3Faults(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 120, 4, 256<<10)
	srv := s3test.Start(t) // its own: the test restarts it
	loc := srv.Upload(t, "faults", "set", dir)
	target, _ := url.Parse(srv.Endpoint)
	want := epochBytes(t, dir, epoch.Shuffle{}, 1<<20, 0)

	t.Run("cut-and-slowdown", func(t *testing.T) {
		f := &faults{target: target, cutEvery: 3, slowDown: 5, delay: time.Millisecond}
		srv.Env(t, testutil.ServeHTTP(t, f))
		if got := epochBytes(t, loc, epoch.Shuffle{}, 1<<20, 0); !bytes.Equal(got, want) {
			t.Fatal("bytes differ under faults")
		}
		if f.n.Load() < 10 {
			t.Fatalf("only %d requests went through the proxy", f.n.Load())
		}
	})
	t.Run("reset-before-headers", func(t *testing.T) {
		// Every 4th request's connection reset before the status line:
		// no response at all, which the SDK sees as a transport error.
		f := &faults{target: target, resetEvery: 4}
		srv.Env(t, testutil.ServeHTTP(t, f))
		if got := epochBytes(t, loc, epoch.Shuffle{}, 1<<20, 0); !bytes.Equal(got, want) {
			t.Fatal("bytes differ with connections reset before their headers")
		}
		if f.n.Load() < 8 {
			t.Fatalf("only %d requests went through the proxy", f.n.Load())
		}
	})
	t.Run("stall-before-headers", func(t *testing.T) {
		// Every 3rd request held 5 s before its headers, past a 300 ms
		// attempt timeout: the try is abandoned and made again.
		f := &faults{target: target, stallEvery: 3, stall: 5 * time.Second}
		srv.Env(t, testutil.ServeHTTP(t, f))
		st, err := objstore.NewS3(context.Background(), "faults", "set", objstore.S3Options{AttemptTimeout: 300 * time.Millisecond, Backoff: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		r, err := shard.OpenStore(context.Background(), st)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		eager, err := shard.Open(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		defer eager.Close()
		for id := int64(0); id < int64(eager.NumGraphs()); id++ {
			g, err1 := r.Graph(id)
			w, err2 := eager.Graph(id)
			if err1 != nil || err2 != nil || !reflect.DeepEqual(g, w) {
				t.Fatalf("graph %d differs with stalled requests (%v, %v)", id, err1, err2)
			}
		}
		if st.Stats().Retries.Load() == 0 {
			t.Fatal("no try was abandoned: the stall never met the attempt timeout")
		}
	})
	t.Run("latency", func(t *testing.T) {
		f := &faults{target: target, delay: 20 * time.Millisecond}
		srv.Env(t, testutil.ServeHTTP(t, f))
		if got := epochBytes(t, loc, epoch.Shuffle{}, 1<<20, 0); !bytes.Equal(got, want) {
			t.Fatal("bytes differ with 20 ms added per request")
		}
	})
	t.Run("restart-mid-epoch", func(t *testing.T) {
		// The server killed and started again after the 6th request: the
		// reads in between are refused, retried, and the epoch completes
		// with the same bytes. A JVM's start took over the default 10
		// attempts' backoff on a loaded machine (CI beside four busy
		// loops): the reader is given the patience a restart needs.
		t.Setenv("AUGLOADER_S3_ATTEMPTS", "40")
		restarted := make(chan struct{})
		f := &faults{target: target, at: func(n int64) {
			if n == 6 {
				go func() {
					srv.Restart(t)
					close(restarted)
				}()
			}
		}}
		srv.Env(t, testutil.ServeHTTP(t, f))
		if got := epochBytes(t, loc, epoch.Shuffle{}, 1, 0); !bytes.Equal(got, want) {
			t.Fatal("bytes differ across a server restart")
		}
		<-restarted
	})
	t.Run("always-down", func(t *testing.T) {
		f := &faults{target: target, slowDown: 1}
		srv.Env(t, testutil.ServeHTTP(t, f))
		st, err := objstore.NewS3(context.Background(), "faults", "set", objstore.S3Options{Attempts: 3, Backoff: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		_, err = st.Open(context.Background(), shard.ManifestName)
		if !errors.Is(err, objstore.ErrRead) || !strings.Contains(err.Error(), "s3://faults/set/manifest.json") ||
			!strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "after 3 attempts") {
			t.Fatalf("want a read error naming the object, the status and the attempts, got %v", err)
		}
		if r := st.Stats().Retries.Load(); r != 2 {
			t.Fatalf("%d retries, want 2", r)
		}
	})
	t.Run("missing", func(t *testing.T) {
		st, err := objstore.Resolve(context.Background(), "s3://faults/nothing-here")
		if err != nil {
			t.Fatal(err)
		}
		_, err = shard.OpenStore(context.Background(), st)
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "s3://faults/nothing-here") {
			t.Fatalf("want not-exist naming the location, got %v", err)
		}
	})
	t.Run("overwritten-mid-epoch", func(t *testing.T) {
		// A shard replaced by other bytes while an epoch reads it by the
		// page (a cache of one byte: every page read again): the epoch
		// fails naming the object, or (had it read everything first) gives
		// the same bytes; never others.
		loc := srv.Upload(t, "overwrite", "set", dir)
		st, err := objstore.NewS3(context.Background(), "overwrite", "set", objstore.S3Options{})
		if err != nil {
			t.Fatal(err)
		}
		name := "shard-00000.arrow"
		var once atomic.Bool
		f := &faults{target: target, at: func(n int64) {
			if n == 8 && once.CompareAndSwap(false, true) {
				srv.PutDamaged(t, st, dir, name, 1.0/3, 0x10)
			}
		}}
		srv.Env(t, testutil.ServeHTTP(t, f))
		got, err := epochStream(t, loc, epoch.Shuffle{}, 1, 0)
		switch {
		case err != nil && (!errors.Is(err, objstore.ErrChanged) && !strings.Contains(err.Error(), "checksum") || !strings.Contains(err.Error(), name)):
			t.Fatalf("want an error naming %s as changed, got %v", name, err)
		case err == nil && !bytes.Equal(got, want):
			t.Fatal("an epoch read across an overwrite gave other bytes")
		case err == nil:
			t.Log("the epoch read every page before the overwrite")
		}
	})
	t.Run("changed", func(t *testing.T) {
		st, err := objstore.NewS3(context.Background(), "faults", "set", objstore.S3Options{})
		if err != nil {
			t.Fatal(err)
		}
		man, err := shard.ReadManifestStore(context.Background(), st)
		if err != nil {
			t.Fatal(err)
		}
		name := man.Shards[0].File
		f, err := st.Open(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		// The object replaced by other bytes of the same size.
		srv.PutDamaged(t, st, dir, name, 0.5, 1)
		_, err = f.ReadAt(context.Background(), make([]byte, 64), 0)
		if !errors.Is(err, objstore.ErrChanged) || !strings.Contains(err.Error(), name) {
			t.Fatalf("want ErrChanged naming %s, got %v", name, err)
		}
	})
}

// Locations: s3:// resolves to the S3 store, a path to a local folder,
// another scheme is refused naming what is supported.
func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		loc, want string
	}{
		{"/data/shards", "/data/shards"},
		{"rel/x.shards", "rel/x.shards"},
		{"s3://bucket/a/b/", "s3://bucket/a/b"},
		{"s3://bucket", "s3://bucket/"},
		{"gs://bucket/x", "unsupported"},
		{"s3:///x", "no bucket"},
	} {
		t.Setenv("AWS_REGION", "us-east-1")
		st, err := objstore.Resolve(context.Background(), tc.loc)
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			got = st.Location()
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("Resolve(%q) = %q, want %q in it", tc.loc, got, tc.want)
		}
	}
}

// PutFolder uploads a file larger than a part by multipart upload, byte
// for byte, and the manifest last.
func TestPutFolderMultipart(t *testing.T) {
	defer objstore.SetPartSize(5 << 20)()
	src := fixture.SynthShardsSized(t, "COLLAB", 60, 8, 0)
	dir := t.TempDir()
	blob := make([]byte, 12<<20+123)
	for i := range blob {
		blob[i] = byte(i*7 + i>>13)
	}
	files := map[string][]byte{"blob.bin": blob}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if files[e.Name()], err = os.ReadFile(filepath.Join(src, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv := s3test.Shared(t)
	srv.Upload(t, "multipart", "seed", src) // makes the bucket
	st, err := objstore.NewS3(context.Background(), "multipart", "set", objstore.S3Options{})
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	if err := st.PutFolder(context.Background(), dir, false, func(name string, _ int64) { order = append(order, name) }); err != nil {
		t.Fatal(err)
	}
	if order[len(order)-1] != shard.ManifestName {
		t.Fatalf("upload order %v: the manifest is not last", order)
	}
	for name, want := range files {
		f, err := st.Open(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, f.Size())
		if _, err := f.ReadAt(context.Background(), got, 0); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: %d bytes back, want %d equal (%v)", name, len(got), len(want), err)
		}
	}
	if err := st.PutFolder(context.Background(), dir, false, nil); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("a second upload without replace: want ErrExists, got %v", err)
	}
}

// Replacing a folder in the store (#47): a new folder whose files have the
// old one's names is refused before anything is written; a replacement
// stopped midway leaves the old folder whole (same bytes served); a
// finished one serves the new folder's bytes, and the old folder's shards
// and graph-size index are gone.
func TestPutFolderReplaces(t *testing.T) {
	ctx := context.Background()
	old := fixture.SynthShardsSized(t, "COLLAB", 120, 4, 128<<10)
	plain := fixture.SynthShardsSized(t, "COLLAB", 90, 5, 128<<10)
	const gen = "00c0ffee00c0ffee"
	next := fixture.SynthShardsWith(t, "COLLAB", 90, 5, convert.Options{ShardBytes: 128 << 10, Generation: gen})
	srv := s3test.Shared(t)
	loc := srv.Upload(t, "replace", "set", old)
	st, err := objstore.NewS3(ctx, "replace", "set", objstore.S3Options{})
	if err != nil {
		t.Fatal(err)
	}
	wantOld := epochBytes(t, old, epoch.Shuffle{}, 0, 0)
	wantNext := epochBytes(t, next, epoch.Shuffle{}, 0, 0)
	if bytes.Equal(wantOld, wantNext) {
		t.Fatal("the two folders serve the same bytes: the test would prove nothing")
	}
	if got := epochBytes(t, plain, epoch.Shuffle{}, 0, 0); !bytes.Equal(got, wantNext) {
		t.Fatal("a generation changed the bytes served")
	}

	if err := st.PutFolder(ctx, plain, true, nil); !errors.Is(err, objstore.ErrSameNames) {
		t.Fatalf("replacing with a folder of the same file names: want ErrSameNames, got %v", err)
	}
	if got := epochBytes(t, loc, epoch.Shuffle{}, 0, 0); !bytes.Equal(got, wantOld) {
		t.Fatal("a refused replacement changed the folder served")
	}

	// Stopped after two files of another generation than next's: those
	// two are what Leftovers lists, before and after next is in place.
	stopped := fixture.SynthShardsWith(t, "COLLAB", 90, 5, convert.Options{ShardBytes: 128 << 10, Generation: "0000000000000bad"})
	var put []string
	cctx, cancel := context.WithCancel(ctx)
	err = st.PutFolder(cctx, stopped, true, func(name string, _ int64) {
		if put = append(put, name); len(put) == 2 {
			cancel()
		}
	})
	cancel()
	if err == nil {
		t.Fatal("a replacement stopped after two files finished")
	}
	if got := epochBytes(t, loc, epoch.Shuffle{}, 0, 0); !bytes.Equal(got, wantOld) {
		t.Fatalf("after a replacement stopped midway (%v) the folder served other bytes", err)
	}
	leftovers := func() []string {
		t.Helper()
		left, err := st.Leftovers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, l := range left {
			names = append(names, l.Name)
		}
		return names
	}
	if got := leftovers(); !reflect.DeepEqual(got, put) {
		t.Fatalf("leftovers of the stopped replacement: %q, want the files it put, %q", got, put)
	}

	if err := st.PutFolder(ctx, next, true, nil); err != nil {
		t.Fatal(err)
	}
	if got := leftovers(); !reflect.DeepEqual(got, put) {
		t.Fatalf("leftovers once another folder is in place: %q, want the stopped one's, %q", got, put)
	}
	if got := epochBytes(t, loc, epoch.Shuffle{}, 0, 0); !bytes.Equal(got, wantNext) {
		t.Fatal("after the replacement the folder does not serve the new bytes")
	}
	oldMan, err := shard.ReadManifest(old)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{oldMan.ShardFile(0), oldMan.GraphSizesFile()} {
		if _, err := st.Open(ctx, name); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the old folder's %s after the replacement: want it gone, got %v", name, err)
		}
	}
	if _, err := st.Open(ctx, shard.ManifestName); err != nil {
		t.Fatal(err)
	}
}
