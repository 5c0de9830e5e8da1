package objstore_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/internal/testkit/s3test"
)

// A folder replaced in the store (every object another ETag): the next
// start drops the old version's entries as it opens each object, rather
// than keep them until evicted (3520536 kept them, held against the
// limit, never read again); the new version's pages are the new bytes.
func TestDiskCacheDropsReplacedVersions(t *testing.T) {
	old := fixture.SynthShardsSized(t, "COLLAB", 240, 2, 256<<10)
	srv := s3test.Shared(t)
	loc := srv.Upload(t, "shards", "collab/v1", old)
	cacheDir := t.TempDir()
	c := openCache(t, openS3(t, loc), cacheDir, 1<<30)
	if _, err := storeStream(t, c, windowed, pageLimit, 0); err != nil {
		t.Fatal(err)
	}
	before := entries(t, cacheDir)
	c.Close()
	replaced := fixture.SynthShardsSized(t, "COLLAB", 240, 3, 256<<10)
	srv.Upload(t, "shards", "collab/v1", replaced)
	c = openCache(t, openS3(t, loc), cacheDir, 1<<30)
	got, err := storeStream(t, c, windowed, pageLimit, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := epochBytes(t, replaced, windowed, pageLimit, 0); !bytes.Equal(got, want) {
		t.Fatal("the replaced folder's epoch differs from its local copy's")
	}
	after := entries(t, cacheDir)
	for _, e := range before {
		for _, a := range after {
			if a == e {
				t.Errorf("%s, an entry of the old version, is still in the folder", filepath.Base(e))
			}
		}
	}
	if st := c.Stats(); st.Stale.Load() != int64(len(before)) || int64(len(after)) != st.Misses.Load() {
		t.Fatalf("%d stale entries dropped of %d old ones; %d entries held after %d misses", st.Stale.Load(), len(before),
			len(after), st.Misses.Load())
	}
}
