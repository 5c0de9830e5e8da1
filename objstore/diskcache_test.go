package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/internal/testkit/s3test"
	"github.com/augloader/augloader/internal/testkit/testutil"
	"github.com/augloader/augloader/objstore"
	"github.com/augloader/augloader/shard"
)

// pageLimit is the shard cache's limit in these tests: a page at a time,
// so pages are read by offset (and read again after an eviction).
const pageLimit = 1 << 20

var windowed = epoch.Shuffle{Window: 4}

// openCache opens a disk cache of inner in dir, closed when the test ends.
func openCache(t testing.TB, inner shard.Store, dir string, limit int64) *objstore.DiskCache {
	t.Helper()
	c, err := objstore.NewDiskCache(inner, dir, limit)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// openS3 opens the S3 store of location.
func openS3(t *testing.T, location string) *objstore.S3 {
	t.Helper()
	st, err := objstore.Resolve(context.Background(), location)
	if err != nil {
		t.Fatal(err)
	}
	return st.(*objstore.S3)
}

// entries lists the cache folder's entry files, by name.
func entries(t testing.TB, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.page"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	return names
}

// An epoch read through a disk cache is the local folder's bytes; the
// next process on the same folder sends no GET (only the HEADs that name
// each file's version) and is served every range from disk.
func TestDiskCacheRestart(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 240, 2, 256<<10)
	srv := s3test.Shared(t)
	loc := srv.Upload(t, "shards", "collab/v1", dir)
	want := epochBytes(t, dir, windowed, pageLimit, 0)
	cacheDir := t.TempDir()
	for run := range 2 {
		s3 := openS3(t, loc)
		c := openCache(t, s3, cacheDir, 1<<30)
		got, err := storeStream(t, c, windowed, pageLimit, 0)
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("run %d: %d bytes differ from the local folder's %d", run, len(got), len(want))
		}
		st := c.Stats()
		gets, hits, misses := s3.Stats().Gets.Load(), st.Hits.Load(), st.Misses.Load()
		t.Logf("run %d: %d GETs, %d hits, %d misses, %d bytes held", run, gets, hits, misses, c.Used())
		switch {
		case run == 0 && (misses == 0 || gets != misses):
			t.Fatalf("first run: %d misses, %d GETs: want one GET per miss", misses, gets)
		case run == 1 && (gets != 0 || misses != 0 || hits == 0):
			t.Fatalf("after a restart: %d GETs, %d misses, %d hits: want every range from disk", gets, misses, hits)
		}
		c.Close()
	}
}

// An object replaced in the store (another ETag) is never served from
// the old object's entries: its pages are fetched again, and these bytes
// are damaged, so the read fails naming the object's whole location.
func TestDiskCacheKeysByVersion(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 240, 2, 256<<10)
	srv := s3test.Shared(t)
	loc := srv.Upload(t, "shards", "collab/v1", dir)
	cacheDir := t.TempDir()
	c := openCache(t, openS3(t, loc), cacheDir, 1<<30)
	if _, err := storeStream(t, c, windowed, pageLimit, 0); err != nil {
		t.Fatal(err)
	}
	c.Close()
	s3 := openS3(t, loc)
	const name = "shard-00000.arrow"
	srv.PutDamaged(t, s3, dir, name, 0.5, 0x10)
	c = openCache(t, s3, cacheDir, 1<<30)
	_, err := storeStream(t, c, windowed, pageLimit, 0)
	if !errors.Is(err, shard.ErrCorrupt) || !strings.Contains(err.Error(), loc+"/"+name) {
		t.Fatalf("want a corruption naming the replaced object's whole location %s/%s, got %v", loc, name, err)
	}
	if c.Stats().Misses.Load() == 0 || s3.Stats().Gets.Load() == 0 {
		t.Fatal("the replaced object was served from the old one's entries")
	}
}

// Every entry is checked on every read: a damaged one is dropped, counted
// and fetched again, and the bytes served are the store's.
func TestDiskCacheChecksEntries(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 240, 2, 256<<10)
	want := epochBytes(t, dir, windowed, pageLimit, 0)
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, entries []string)
	}{
		{"flipped byte", func(t *testing.T, e []string) { flip(t, e[0], 0.5) }},
		{"flipped CRC", func(t *testing.T, e []string) { flip(t, e[0], 1) }},
		{"torn", func(t *testing.T, e []string) {
			info, err := os.Stat(e[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(e[0], info.Size()/2); err != nil {
				t.Fatal(err)
			}
		}},
		{"another key's entry", func(t *testing.T, e []string) { copyFile(t, e[1], e[0]) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cacheDir := t.TempDir()
			c := openCache(t, shard.DirStore(dir), cacheDir, 1<<30)
			if _, err := storeStream(t, c, windowed, pageLimit, 0); err != nil {
				t.Fatal(err)
			}
			c.Close()
			tc.damage(t, entries(t, cacheDir))
			c = openCache(t, shard.DirStore(dir), cacheDir, 1<<30)
			got, err := storeStream(t, c, windowed, pageLimit, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatal("a damaged entry changed the bytes served")
			}
			if bad, misses := c.Stats().Bad.Load(), c.Stats().Misses.Load(); bad != 1 || misses != 1 {
				t.Fatalf("%d bad entries, %d misses: want the damaged one found and fetched again", bad, misses)
			}
		})
	}
}

// flip XORs the byte at fraction at of file path (1: the last).
func flip(t *testing.T, path string, at float64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[min(int(float64(len(b))*at), len(b)-1)] ^= 0x40
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func size(t *testing.T, path string) int64 {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The folder holds at most the limit: while serving, and at open when a
// previous process left more (the least recently used, by modification
// time, dropped first).
func TestDiskCacheLimit(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 240, 2, 256<<10)
	want := epochBytes(t, dir, windowed, pageLimit, 0)
	cacheDir := t.TempDir()
	c := openCache(t, shard.DirStore(dir), cacheDir, 1<<30)
	if _, err := storeStream(t, c, windowed, pageLimit, 0); err != nil {
		t.Fatal(err)
	}
	all := c.Used()
	c.Close()

	// At open: every entry but one made old; a limit that holds the young
	// one alone keeps it.
	names := entries(t, cacheDir)
	young := names[len(names)/2]
	old := time.Now().Add(-time.Hour)
	for _, n := range names {
		if n != young {
			if err := os.Chtimes(n, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	c = openCache(t, shard.DirStore(dir), cacheDir, size(t, young))
	if left := entries(t, cacheDir); len(left) != 1 || left[0] != young {
		t.Fatalf("at open under a limit of one entry: %d entries left, want the most recently used one", len(left))
	}
	c.Close()

	// While serving, with a third of what the epoch reads.
	limit := all / 3
	c = openCache(t, shard.DirStore(dir), cacheDir, limit)
	got, err := storeStream(t, c, windowed, pageLimit, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the bytes differ under a disk cache limit")
	}
	var held int64
	for _, n := range entries(t, cacheDir) {
		held += size(t, n)
	}
	if c.Used() > limit || held != c.Used() || c.Stats().Evictions.Load() == 0 {
		t.Fatalf("limit %d: %d bytes held (%d on disk), %d evictions", limit, c.Used(), held, c.Stats().Evictions.Load())
	}
}

// One process per folder, named when refused; at open the temporary files
// a stopped process left go, and files that are not the cache's stay; an
// entry that cannot be written leaves the read whole.
func TestDiskCacheFolder(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 120, 2, 256<<10)
	want := epochBytes(t, dir, windowed, pageLimit, 0)
	cacheDir := t.TempDir()
	c := openCache(t, shard.DirStore(dir), cacheDir, 1<<30)
	_, err := objstore.NewDiskCache(shard.DirStore(dir), cacheDir, 1<<30)
	if !errors.Is(err, objstore.ErrDiskCache) || !strings.Contains(err.Error(), "in use") || !strings.Contains(err.Error(), strconv.Itoa(os.Getpid())) {
		t.Fatalf("a second process on the folder: want ErrDiskCache naming the holder's pid, got %v", err)
	}
	if _, err := storeStream(t, c, windowed, pageLimit, 0); err != nil {
		t.Fatal(err)
	}
	c.Close()

	names := entries(t, cacheDir)
	// The first entry's name taken by a folder: its rename fails.
	blocked := names[0]
	if err := os.Remove(blocked); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(blocked, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	keep := []string{filepath.Join(cacheDir, "notes.txt"), filepath.Join(cacheDir, "short.page")}
	for _, k := range keep {
		if err := os.WriteFile(k, []byte("mine"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stale := filepath.Join(cacheDir, ".tmp-123.page")
	if err := os.WriteFile(stale, []byte("AUGPAG"), 0o644); err != nil { // a header torn midway
		t.Fatal(err)
	}
	c = openCache(t, shard.DirStore(dir), cacheDir, 1<<30)
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a stopped write's temporary file is still there (%v)", err)
	}
	for _, k := range keep {
		if b, err := os.ReadFile(k); err != nil || string(b) != "mine" {
			t.Fatalf("%s, not the cache's, was touched (%v)", k, err)
		}
	}
	got, err := storeStream(t, c, windowed, pageLimit, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) || c.Stats().WriteErrors.Load() == 0 {
		t.Fatalf("an entry that cannot be written: same bytes %v, %d write errors", bytes.Equal(got, want), c.Stats().WriteErrors.Load())
	}
}

// Any bytes in the place of an entry are served only when they are the
// store's: a damaged, forged or foreign entry is refused and the range
// read from the store.
func FuzzDiskCacheEntry(f *testing.F) {
	src := f.TempDir()
	want := []byte("the bytes of the store's file, read whole through the cache")
	if err := os.WriteFile(filepath.Join(src, "file"), want, 0o644); err != nil {
		f.Fatal(err)
	}
	// The seed corpus: the entry the cache writes, and it damaged.
	cacheDir := f.TempDir()
	entry := readThrough(f, src, cacheDir)
	f.Add(entry)
	f.Add(entry[:len(entry)-1])
	f.Add(append(append([]byte(nil), entry...), 0))
	f.Add([]byte("AUGPAGE1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cacheDir := t.TempDir()
		name := filepath.Base(entries(t, fillDir(t, src, cacheDir))[0])
		if err := os.WriteFile(filepath.Join(cacheDir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		c := openCache(t, shard.DirStore(src), cacheDir, 1<<20)
		got := read(t, c)
		if !bytes.Equal(got, want) {
			t.Fatalf("served %q, want the store's bytes", got)
		}
		if hit := c.Stats().Hits.Load() == 1; hit != bytes.Equal(b, entry) {
			t.Fatalf("entry %q: served from disk %v", b, hit)
		}
	})
}

// readThrough reads file of folder src through a cache in cacheDir and
// returns the entry written.
func readThrough(tb testing.TB, src, cacheDir string) []byte {
	tb.Helper()
	fillDir(tb, src, cacheDir)
	names, _ := filepath.Glob(filepath.Join(cacheDir, "*.page"))
	b, err := os.ReadFile(names[0])
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// fillDir reads file of src once through a cache in cacheDir and closes it.
func fillDir(tb testing.TB, src, cacheDir string) string {
	tb.Helper()
	c, err := objstore.NewDiskCache(shard.DirStore(src), cacheDir, 1<<20)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	read(tb, c)
	return cacheDir
}

// read reads file whole through store st.
func read(tb testing.TB, st shard.Store) []byte {
	tb.Helper()
	fh, err := st.Open(context.Background(), "file")
	if err != nil {
		tb.Fatal(err)
	}
	defer fh.Close()
	p := make([]byte, fh.Size())
	if _, err := fh.ReadAt(context.Background(), p, 0); err != nil {
		tb.Fatal(err)
	}
	return p
}

// flipFirstShardGet is a fault proxy's flip that damages the first ranged
// GET of a shard file, once, and counts it in flipped.
func flipFirstShardGet(flipped *atomic.Int64) func(int64, *http.Request) bool {
	return func(_ int64, r *http.Request) bool {
		return strings.Contains(r.URL.Path, "/shard-") && flipped.CompareAndSwap(0, 1)
	}
}

// One GET whose body has a flipped byte (the store honest, the transfer
// not) costs one more GET: the epoch is the local folder's bytes, with
// and without a disk cache. The entry written from the damaged body is
// dropped, counted bad, not served again: a restart against the honest
// store reads every range from disk without an error.
func TestDamagedTransferCostsOneRead(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 240, 2, 256<<10)
	srv := s3test.Shared(t)
	loc := srv.Upload(t, "shards", "collab/v1", dir)
	target, _ := url.Parse(srv.Endpoint)
	want := epochBytes(t, dir, windowed, pageLimit, 0)
	for _, cached := range []bool{false, true} {
		t.Run(fmt.Sprintf("disk-cache=%v", cached), func(t *testing.T) {
			var flipped atomic.Int64
			srv.Env(t, testutil.ServeHTTP(t, &faults{target: target, flip: flipFirstShardGet(&flipped)}))
			cacheDir := t.TempDir()
			s3 := openS3(t, loc)
			var st shard.Store = s3
			var c *objstore.DiskCache
			if cached {
				c = openCache(t, s3, cacheDir, 1<<30)
				st = c
			}
			got, err := storeStream(t, st, windowed, pageLimit, 0)
			if err != nil {
				t.Fatalf("one damaged transfer: %v", err)
			}
			if !bytes.Equal(got, want) || flipped.Load() != 1 {
				t.Fatalf("same bytes %v, %d bodies damaged", bytes.Equal(got, want), flipped.Load())
			}
			if r := s3.Stats().Retries.Load(); r != 1 {
				t.Fatalf("%d retries: want the damaged range read once more", r)
			}
			if !cached {
				return
			}
			if bad := c.Stats().Bad.Load(); bad != 1 {
				t.Fatalf("%d bad entries: want the one written from the damaged body", bad)
			}
			c.Close()
			s3 = openS3(t, loc)
			c = openCache(t, s3, cacheDir, 1<<30)
			got, err = storeStream(t, c, windowed, pageLimit, 0)
			if err != nil {
				t.Fatalf("after a restart: %v", err)
			}
			if !bytes.Equal(got, want) || c.Stats().Bad.Load() != 0 {
				t.Fatalf("after a restart: same bytes %v, %d bad entries", bytes.Equal(got, want), c.Stats().Bad.Load())
			}
			if s3.Stats().Gets.Load() > 1 {
				t.Fatalf("after a restart: %d GETs, want the ranges from disk (at most the one never kept)", s3.Stats().Gets.Load())
			}
		})
	}
}

// The cache writes and removes only its own files: a lock that is a
// link, a hard link or a FIFO is refused with the folder named and the
// user's file untouched; a temporary-looking or entry-length name that it
// did not write is never removed, evicted or served; a FIFO in place of an
// entry neither hangs a read nor is removed.
func TestDiskCacheOwnsOnlyItsFiles(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 120, 2, 256<<10)
	want := epochBytes(t, dir, windowed, pageLimit, 0)
	user := filepath.Join(t.TempDir(), "notes.txt")
	const mine = "the user's own words\n"
	if err := os.WriteFile(user, []byte(mine), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		lock func(path string) error
	}{
		{"symlink", func(p string) error { return os.Symlink(user, p) }},
		{"hard link", func(p string) error { return os.Link(user, p) }},
		{"fifo", func(p string) error { return syscall.Mkfifo(p, 0o644) }},
		{"other text", func(p string) error { return os.WriteFile(p, []byte("not a pid"), 0o644) }},
	} {
		t.Run("lock/"+tc.name, func(t *testing.T) {
			cacheDir := t.TempDir()
			if err := tc.lock(filepath.Join(cacheDir, ".lock")); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := objstore.NewDiskCache(shard.DirStore(dir), cacheDir, 1<<30)
				done <- err
			}()
			select {
			case err := <-done:
				if !errors.Is(err, objstore.ErrDiskCache) || !strings.Contains(err.Error(), filepath.Join(cacheDir, ".lock")) {
					t.Fatalf("want ErrDiskCache naming the lock, got %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("opening the cache hung on its lock")
			}
			if b, err := os.ReadFile(user); err != nil || string(b) != mine {
				t.Fatalf("the user's file changed: %q, %v", b, err)
			}
		})
	}

	t.Run("strangers", func(t *testing.T) {
		cacheDir := t.TempDir()
		strangers := map[string]string{
			".tmp-user.page":                        "a user's file",
			".tmp-123.page":                         "digits, but not a header of ours",
			"my-holiday-photos-from-2019-mmmm.page": "32 characters and .page",
			"0123456789abcdef0123456789abcdef.page": "an entry's name, another header",
			"12345.page":                            "AUGPAGE1 digits without the temporary prefix",
		}
		for n, b := range strangers {
			if err := os.WriteFile(filepath.Join(cacheDir, n), []byte(b), 0o644); err != nil {
				t.Fatal(err)
			}
			old := time.Now().Add(-time.Hour) // the oldest, evicted first if taken for entries
			os.Chtimes(filepath.Join(cacheDir, n), old, old)
		}
		// A limit of a few entries: evictions while the epoch is served.
		c := openCache(t, shard.DirStore(dir), cacheDir, 300<<10)
		got, err := storeStream(t, c, windowed, pageLimit, 0)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("same bytes %v, %v", bytes.Equal(got, want), err)
		}
		if c.Stats().Evictions.Load() == 0 {
			t.Fatal("no eviction: the limit did not bite")
		}
		c.Close()
		for n, b := range strangers {
			if got, err := os.ReadFile(filepath.Join(cacheDir, n)); err != nil || string(got) != b {
				t.Fatalf("%s, not the cache's, was touched (%q, %v)", n, got, err)
			}
		}
	})

	t.Run("fifo-entry", func(t *testing.T) {
		cacheDir := t.TempDir()
		c := openCache(t, shard.DirStore(dir), cacheDir, 1<<30)
		if _, err := storeStream(t, c, windowed, pageLimit, 0); err != nil {
			t.Fatal(err)
		}
		c.Close()
		// The FIFOs put in place of indexed entries, under a running cache.
		c = openCache(t, shard.DirStore(dir), cacheDir, 1<<30)
		names := entries(t, cacheDir)
		for _, n := range names[:2] {
			if err := os.Remove(n); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(n, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		type result struct {
			b   []byte
			err error
		}
		done := make(chan result, 1)
		go func() {
			b, err := storeStream(t, c, windowed, pageLimit, 0)
			done <- result{b, err}
		}()
		select {
		case r := <-done:
			if r.err != nil || !bytes.Equal(r.b, want) {
				t.Fatalf("same bytes %v, %v", bytes.Equal(r.b, want), r.err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("a FIFO in an entry's place hung the read")
		}
		for _, n := range names[:2] {
			if info, err := os.Lstat(n); err != nil || info.Mode()&fs.ModeNamedPipe == 0 {
				t.Fatalf("%s: the FIFO in an entry's place was replaced or removed (%v)", n, err)
			}
		}
	})
}
