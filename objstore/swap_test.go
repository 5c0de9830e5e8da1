package objstore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/ingest/convert"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/internal/testkit/s3test"
	"github.com/augloader/augloader/internal/testkit/testutil"
	"github.com/augloader/augloader/objstore"
	"github.com/augloader/augloader/shard"
)

// putHook is a proxy before the S3 server that tells before (when set) of
// each PUT and may answer it itself after passing it on (after returns
// true: the answer is 503, as if lost).
type putHook struct {
	target *url.URL
	before func(key string)
	after  func(key string) (lose bool)
	// refuse (when set) answers a PUT it returns true for with 501
	// NotImplemented, not passing it on: a store without conditional
	// writes.
	refuse func(r *http.Request) bool
	// other (when set) is told of every request but a PUT before it is
	// passed on.
	other func(r *http.Request)
}

func (h *putHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := httputil.NewSingleHostReverseProxy(h.target)
	if r.Method != http.MethodPut {
		if h.other != nil {
			h.other(r)
		}
		p.ServeHTTP(w, r)
		return
	}
	if h.before != nil {
		h.before(r.URL.Path)
	}
	if h.refuse != nil && h.refuse(r) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusNotImplemented)
		io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NotImplemented</Code><Message>conditional writes are not implemented</Message></Error>`)
		return
	}
	rec := &recorded{header: http.Header{}}
	p.ServeHTTP(rec, r)
	if h.after != nil && h.after(r.URL.Path) {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	for k, v := range rec.header {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.status)
	w.Write(rec.body.Bytes())
}

// recorded is a response held back by putHook.
type recorded struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorded) Header() http.Header         { return r.header }
func (r *recorded) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorded) WriteHeader(s int)           { r.status = s }

// A replacement's swap is safe where the store's answers are lost or
// another replacement overtakes it: a manifest PUT applied whose answer
// was lost is done (not made again over another's); a replacement
// overtaken by another stops with ErrReplaced and deletes nothing, and the
// prefix holds the other's folder whole; a new file gone before the swap
// (a prune) stops it with ErrIncomplete, the old folder served as before;
// a bucket that does not exist is refused before anything is written.
func TestSwapIsSafe(t *testing.T) {
	ctx := context.Background()
	old := fixture.SynthShardsSized(t, "COLLAB", 120, 4, 128<<10)
	genA := fixture.SynthShardsWith(t, "COLLAB", 90, 5, convert.Options{ShardBytes: 128 << 10, Generation: "aaaaaaaaaaaaaaaa"})
	genB := fixture.SynthShardsWith(t, "COLLAB", 60, 6, convert.Options{ShardBytes: 128 << 10, Generation: "bbbbbbbbbbbbbbbb"})
	srv := s3test.Shared(t)
	target, _ := url.Parse(srv.Endpoint)
	wantOld := epochBytes(t, old, epoch.Shuffle{}, 0, 0)
	wantA := epochBytes(t, genA, epoch.Shuffle{}, 0, 0)
	wantB := epochBytes(t, genB, epoch.Shuffle{}, 0, 0)
	served := func(t *testing.T, loc string, want []byte, what string) {
		t.Helper()
		srv.Env(t, srv.Endpoint)
		if got := epochBytes(t, loc, epoch.Shuffle{}, 0, 0); !bytes.Equal(got, want) {
			t.Fatalf("%s does not serve %s", loc, what)
		}
	}
	isManifest := func(key string) bool { return strings.HasSuffix(key, "/manifest.json") }

	t.Run("lost-answer", func(t *testing.T) {
		loc := srv.Upload(t, "swap", "lost", old)
		var lost atomic.Int64
		srv.Env(t, testutil.ServeHTTP(t, &putHook{target: target, after: func(key string) bool {
			return isManifest(key) && lost.CompareAndSwap(0, 1)
		}}))
		st, err := objstore.NewS3(ctx, "swap", "lost", objstore.S3Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.PutFolder(ctx, genA, true, nil); err != nil || lost.Load() != 1 {
			t.Fatalf("a swap whose answer was lost: %v (%d answers lost)", err, lost.Load())
		}
		served(t, loc, wantA, "the new folder")
	})

	t.Run("overtaken", func(t *testing.T) {
		loc := srv.Upload(t, "swap", "race", old)
		direct, err := objstore.NewS3(ctx, "swap", "race", objstore.S3Options{}) // B, straight to the store
		if err != nil {
			t.Fatal(err)
		}
		var bErr error
		var once atomic.Bool
		srv.Env(t, testutil.ServeHTTP(t, &putHook{target: target, after: func(key string) bool {
			if !isManifest(key) || !once.CompareAndSwap(false, true) {
				return false
			}
			// A's swap applied; its answer held while B replaces A's
			// folder whole; then A's answer is lost.
			bErr = direct.PutFolder(ctx, genB, true, nil)
			return true
		}}))
		a, err := objstore.NewS3(ctx, "swap", "race", objstore.S3Options{})
		if err != nil {
			t.Fatal(err)
		}
		err = a.PutFolder(ctx, genA, true, nil)
		if bErr != nil {
			t.Fatalf("B's replacement: %v", bErr)
		}
		if !errors.Is(err, objstore.ErrReplaced) {
			t.Fatalf("A, overtaken by B: want ErrReplaced, got %v", err)
		}
		served(t, loc, wantB, "B's folder, whole")
	})

	// A store without conditional writes (501 NotImplemented to If-Match):
	// the unconditional PUT comes only after a read of the manifest in
	// place, so a replacement overtaken meanwhile stops with ErrReplaced
	// instead of overwriting the other's swap (and reporting success).
	t.Run("not-implemented-overtaken", func(t *testing.T) {
		loc := srv.Upload(t, "swap", "noncond", old)
		direct, err := objstore.NewS3(ctx, "swap", "noncond", objstore.S3Options{})
		if err != nil {
			t.Fatal(err)
		}
		var bErr error
		var once atomic.Bool
		var conditional, unconditional atomic.Int64
		srv.Env(t, testutil.ServeHTTP(t, &putHook{target: target, refuse: func(r *http.Request) bool {
			if !isManifest(r.URL.Path) {
				return false
			}
			if r.Header.Get("If-Match") == "" && r.Header.Get("If-None-Match") == "" {
				unconditional.Add(1)
				return false
			}
			conditional.Add(1)
			if once.CompareAndSwap(false, true) {
				bErr = direct.PutFolder(ctx, genB, true, nil) // B, straight to the store, meanwhile
			}
			return true
		}}))
		a, err := objstore.NewS3(ctx, "swap", "noncond", objstore.S3Options{})
		if err != nil {
			t.Fatal(err)
		}
		err = a.PutFolder(ctx, genA, true, nil)
		if bErr != nil {
			t.Fatalf("B's replacement: %v", bErr)
		}
		if !errors.Is(err, objstore.ErrReplaced) {
			t.Fatalf("A, overtaken by B at a store without conditional writes: want ErrReplaced, got %v (%d conditional, %d unconditional manifest PUTs)", err, conditional.Load(), unconditional.Load())
		}
		if n := unconditional.Load(); n != 0 {
			t.Errorf("%d unconditional manifest PUTs after B's swap", n)
		}
		served(t, loc, wantB, "B's folder, whole")
	})

	t.Run("not-implemented", func(t *testing.T) {
		loc := srv.Upload(t, "swap", "noncond2", old)
		srv.Env(t, testutil.ServeHTTP(t, &putHook{target: target, refuse: func(r *http.Request) bool {
			return isManifest(r.URL.Path) && (r.Header.Get("If-Match") != "" || r.Header.Get("If-None-Match") != "")
		}}))
		a, err := objstore.NewS3(ctx, "swap", "noncond2", objstore.S3Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.PutFolder(ctx, genA, true, nil); err != nil {
			t.Fatalf("a replacement at a store without conditional writes: %v", err)
		}
		served(t, loc, wantA, "the new folder")
	})

	// Stopped at the swap (the manifest PUT applied, its answer not read:
	// a signal while it was under way) and right after it: the new folder
	// is in place with its own split, which went up before the swap under
	// its generation, and the error says so (ErrSwapped), never that the
	// old folder is in place; the old folder's split is a leftover. On
	// 1426eb2 the split went up after the swap, and a stop there left the
	// new manifest with the old split; a stop during the PUT said
	// nothing of which folder was in place.
	for _, when := range []string{"during", "after"} {
		t.Run("stopped-"+when+"-swap", func(t *testing.T) {
			old, genA := withSplit(t, old, "old"), withSplit(t, genA, "new")
			loc := srv.Upload(t, "swap", when, old)
			sctx, stop := context.WithCancel(ctx)
			defer stop()
			var swapped atomic.Bool
			srv.Env(t, testutil.ServeHTTP(t, &putHook{target: target,
				after: func(key string) bool {
					if isManifest(key) {
						swapped.Store(true)
						if when == "during" {
							stop()
						}
					}
					return false
				},
				other: func(r *http.Request) {
					if when == "after" && swapped.Load() {
						stop()
					}
				}}))
			a, err := objstore.NewS3(ctx, "swap", when, objstore.S3Options{})
			if err != nil {
				t.Fatal(err)
			}
			err = a.PutFolder(sctx, genA, true, nil)
			if !errors.Is(err, objstore.ErrSwapped) {
				t.Fatalf("stopped %s the swap: want ErrSwapped, got %v", when, err)
			}
			served(t, loc, wantA, "the new folder")
			direct, err := objstore.NewS3(ctx, "swap", when, objstore.S3Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := splitIn(t, direct); got != "new" {
				t.Fatalf("stopped %s the swap: the new folder's split holds %q", when, got)
			}
			if _, errs := shard.VerifyStore(ctx, direct); len(errs) > 0 {
				t.Fatalf("verify of the new folder: %v", errs)
			}
			left, err := direct.Leftovers(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, l := range left {
				names = append(names, l.Name)
			}
			if !slices.Contains(names, "split-x.json") || !slices.Contains(names, "shard-00000.arrow") {
				t.Fatalf("leftovers after a replacement stopped %s its swap: %v, want the old split and shards", when, names)
			}
		})
	}

	t.Run("incomplete", func(t *testing.T) {
		old, genA := withSplit(t, old, "old"), withSplit(t, genA, "new")
		loc := srv.Upload(t, "swap", "pruned", old)
		direct, err := objstore.NewS3(ctx, "swap", "pruned", objstore.S3Options{})
		if err != nil {
			t.Fatal(err)
		}
		var once atomic.Bool
		srv.Env(t, testutil.ServeHTTP(t, &putHook{target: target, before: func(key string) {
			// While the second shard goes up, a prune takes the first
			// shard of A meanwhile.
			if strings.Contains(key, "shard-00001.aaaaaaaaaaaaaaaa") && once.CompareAndSwap(false, true) {
				if err := direct.Delete(ctx, "shard-00000.aaaaaaaaaaaaaaaa.arrow"); err != nil {
					t.Error(err)
				}
			}
		}}))
		st, err := objstore.NewS3(ctx, "swap", "pruned", objstore.S3Options{})
		if err != nil {
			t.Fatal(err)
		}
		err = st.PutFolder(ctx, genA, true, nil)
		if !errors.Is(err, objstore.ErrIncomplete) || !strings.Contains(err.Error(), "shard-00000.aaaaaaaaaaaaaaaa.arrow") {
			t.Fatalf("a new file gone before the swap: want ErrIncomplete naming it, got %v", err)
		}
		served(t, loc, wantOld, "the old folder")
		if got := splitIn(t, direct); got != "old" {
			t.Fatalf("a stopped replacement left the old folder with split %q", got)
		}
		// Finished: the new folder with its own split.
		srv.Env(t, srv.Endpoint)
		if err := direct.PutFolder(ctx, genA, true, nil); err != nil {
			t.Fatal(err)
		}
		if got := splitIn(t, direct); got != "new" {
			t.Fatalf("the new folder's split: %q", got)
		}
	})

	t.Run("no-bucket", func(t *testing.T) {
		srv.Env(t, srv.Endpoint)
		st, err := objstore.NewS3(ctx, "nosuchbucket", "x", objstore.S3Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Vacant(ctx, false); err == nil || !strings.Contains(err.Error(), "no such bucket") {
			t.Fatalf("a bucket that does not exist: %v", err)
		}
	})
}

// withSplit is a copy of shard folder dir with a split file whose text is
// what (a split file beside the shards, as a converted OGB set has).
func withSplit(t *testing.T, dir, what string) string {
	t.Helper()
	out := fixture.CopyDir(t, dir)
	// As the converter lists a split (shard.Writer.AddFile).
	fixture.RewriteManifest(t, out, func(m *shard.Manifest) {
		sum := sha256.Sum256([]byte(what))
		m.Files = append(m.Files, shard.FileInfo{Name: "split-x.json", Bytes: int64(len(what)), SHA256: hex.EncodeToString(sum[:])})
		if err := os.WriteFile(filepath.Join(out, m.StoredName("split-x.json")), []byte(what), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	return out
}

// splitIn reads split-x.json of the folder st holds, by the name its
// manifest gives it.
func splitIn(t *testing.T, st *objstore.S3) string {
	t.Helper()
	man, err := shard.ReadManifestStore(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	if man.File("split-x.json") == nil {
		t.Fatal("the manifest lists no split-x.json")
	}
	f, err := st.Open(context.Background(), man.StoredName("split-x.json"))
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, f.Size())
	if _, err := f.ReadAt(context.Background(), b, 0); err != nil {
		t.Fatal(err)
	}
	return string(b)
}
