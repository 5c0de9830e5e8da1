package shard_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/shard"
)

// withoutPageMap copies the folder src as one written before page maps:
// its manifest without them (resealed), and without the graph-size index
// (whose trailer names the manifest).
func withoutPageMap(t *testing.T, src string) string {
	t.Helper()
	dir := copyDir(t, src)
	fixture.WithoutPageMap(t, dir)
	return dir
}

// The converter writes each shard's page map; a reader by the page then
// reads a page with no pass over its shard, and every read graph is the
// eager reader's.
func TestPageMapReadAlone(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 600, 3, 1<<20)
	man, err := shard.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	pages := 0
	for _, s := range man.Shards {
		if s.PageMap == nil || len(s.PageMap.Pages) != len(s.Batches) {
			t.Fatalf("%s: page map %+v for %d batches", s.File, s.PageMap, len(s.Batches))
		}
		pages += len(s.Batches)
	}
	if len(man.Shards) < 2 || pages < 4 {
		t.Fatalf("want several shards of several pages, got %d shards, %d pages", len(man.Shards), pages)
	}
	if _, errs := shard.Verify(context.Background(), dir); len(errs) > 0 {
		t.Fatalf("verify of a fresh folder: %v", errs)
	}
	eager, err := shard.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer eager.Close()
	r, err := shard.Open(context.Background(), dir, shard.WithCacheLimit(1<<30))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	last := r.NumPages() - 1
	first, n := r.PageGraphs(last)
	for pos := first; pos < first+n; pos++ {
		id := man.IDAt(pos)
		g, rel, err := r.Pin(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := eager.Graph(id)
		if g.NumNodes != want.NumNodes || !equalInt32(g.Edges, want.Edges) {
			t.Fatalf("graph %d differs read by the page", id)
		}
		rel()
	}
	if st := r.Stats(); st.Scans != 0 || st.Loads != 1 {
		t.Fatalf("one page of the last shard read with %d scans and %d loads, want 0 and 1", st.Scans, st.Loads)
	}
}

func equalInt32(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A byte changed in a page is refused when that page is read, naming it;
// the other pages of the shard are served (with a page map nothing reads
// the shard whole, so nothing refuses the shard whole).
func TestPageMapDamagedPage(t *testing.T) {
	src := fixture.SynthShardsSized(t, "COLLAB", 2000, 3, 64<<20)
	dir := copyDir(t, src)
	man, err := shard.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	pm := man.Shards[0].PageMap
	if len(pm.Pages) < 3 {
		t.Fatalf("want a shard of several pages, got %d", len(pm.Pages))
	}
	damaged := len(pm.Pages) / 2
	at := pm.Pages[damaged].Offset + pm.Pages[damaged].Length/2
	path := filepath.Join(dir, man.Shards[0].File)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[at] ^= 0x10
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := shard.Open(context.Background(), dir, shard.WithCacheLimit(1<<30))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for p := range r.NumPages() {
		first, _ := r.PageGraphs(p)
		err := pin(r, man.IDAt(first))
		var ce *shard.CorruptionError
		switch {
		case p == damaged && errors.As(err, &ce) && ce.Field == "checksum" && strings.Contains(ce.Detail, "batch "):
		case p == damaged:
			t.Fatalf("the damaged page %d: %v, want a checksum error naming its batch", p, err)
		case err != nil:
			t.Fatalf("page %d: %v", p, err)
		}
	}
	if _, errs := shard.Verify(context.Background(), dir); len(errs) == 0 {
		t.Fatal("verify passed a damaged shard")
	}
}

// A page map that disagrees with its file (resealed, so the manifest
// itself is sound) is refused by verify and by a read of the page, never
// read as other bytes.
func TestPageMapForged(t *testing.T) {
	src := fixture.SynthShardsSized(t, "COLLAB", 300, 3, 1<<20)
	for _, c := range []struct {
		name  string
		forge func(pm *shard.PageMap)
	}{
		{"crc", func(pm *shard.PageMap) { pm.Pages[0].CRC32C = "00000000" }},
		{"offset", func(pm *shard.PageMap) { pm.Pages[0].Offset += 8; pm.Pages[0].Length -= 8 }},
		{"metadata", func(pm *shard.PageMap) { pm.Pages[0].Metadata += 8 }},
		{"schema", func(pm *shard.PageMap) { pm.Schema.CRC32C = "00000000" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := copyDir(t, src)
			var man *shard.Manifest
			fixture.RewriteManifest(t, dir, func(m *shard.Manifest) { c.forge(m.Shards[0].PageMap); man = m })
			if _, errs := shard.Verify(context.Background(), dir); len(errs) == 0 || !errors.Is(errors.Join(errs...), shard.ErrCorrupt) {
				t.Fatalf("verify: %v, want a corruption", errs)
			}
			r, err := shard.Open(context.Background(), dir, shard.WithCacheLimit(1<<30))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if err := pin(r, man.IDAt(0)); !errors.Is(err, shard.ErrCorrupt) {
				t.Fatalf("read of a page the map misplaces: %v, want a corruption", err)
			}
		})
	}
}

// A manifest's page map is checked with the manifest: one page a batch,
// the schema message after the magic, pages in order inside the file.
func TestPageMapManifestChecked(t *testing.T) {
	src := fixture.SynthShardsSized(t, "COLLAB", 300, 3, 1<<20)
	raw, err := os.ReadFile(filepath.Join(src, shard.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		forge func(s *shard.ShardInfo)
	}{
		{"a page missing", func(s *shard.ShardInfo) { s.PageMap.Pages = s.PageMap.Pages[:len(s.PageMap.Pages)-1] }},
		{"schema elsewhere", func(s *shard.ShardInfo) { s.PageMap.Schema.Offset = 16 }},
		{"pages out of order", func(s *shard.ShardInfo) {
			p := s.PageMap.Pages
			p[0], p[len(p)-1] = p[len(p)-1], p[0]
		}},
		{"past the end", func(s *shard.ShardInfo) { s.PageMap.Pages[len(s.PageMap.Pages)-1].Length = s.Bytes }},
		{"crc not hex", func(s *shard.ShardInfo) { s.PageMap.Pages[0].CRC32C = "0000000G" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			man, err := shard.ParseManifest(raw)
			if err != nil {
				t.Fatal(err)
			}
			if len(man.Shards[0].PageMap.Pages) < 2 {
				t.Fatal("want a shard of several pages")
			}
			c.forge(&man.Shards[0])
			data, err := man.Encode()
			if err == nil {
				_, err = shard.ParseManifest(data)
			}
			var ce *shard.CorruptionError
			if !errors.As(err, &ce) || ce.Field != "page_map" {
				t.Fatalf("%v, want a corruption of the page map", err)
			}
		})
	}
}

// shardconv pagemap's work: a folder written before page maps gets the
// maps the converter would have written, its graph-size index made to
// name the new manifest; a mapped folder is left as it is.
func TestAddPageMap(t *testing.T) {
	src := fixture.SynthShardsSized(t, "COLLAB", 600, 3, 1<<20)
	want, err := shard.ReadManifest(src)
	if err != nil {
		t.Fatal(err)
	}
	dir := withoutPageMap(t, src)
	// The index as the converter wrote it, to put back beside the
	// stripped manifest: AddPageMap must make it name the new one.
	sizes, err := os.ReadFile(filepath.Join(src, shard.GraphSizesName))
	if err != nil {
		t.Fatal(err)
	}
	stripped, err := os.ReadFile(filepath.Join(dir, shard.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256Sum(stripped)
	copy(sizes[len(sizes)-56+24:], sum[:])
	if err := os.WriteFile(filepath.Join(dir, shard.GraphSizesName), sizes, 0o644); err != nil {
		t.Fatal(err)
	}
	man, mapped, err := shard.AddPageMap(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if mapped != len(want.Shards) {
		t.Fatalf("mapped %d shards of %d", mapped, len(want.Shards))
	}
	for i := range want.Shards {
		a, b := *want.Shards[i].PageMap, *man.Shards[i].PageMap
		if a.Schema != b.Schema || len(a.Pages) != len(b.Pages) {
			t.Fatalf("%s: map %+v, the converter's %+v", want.Shards[i].File, b, a)
		}
		for p := range a.Pages {
			if a.Pages[p] != b.Pages[p] {
				t.Fatalf("%s page %d: %+v, the converter's %+v", want.Shards[i].File, p, b.Pages[p], a.Pages[p])
			}
		}
	}
	got, err := os.ReadFile(filepath.Join(dir, shard.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	orig, _ := os.ReadFile(filepath.Join(src, shard.ManifestName))
	if !bytes.Equal(got, orig) {
		t.Fatal("the mapped manifest is not the converter's")
	}
	if _, errs := shard.Verify(context.Background(), dir); len(errs) > 0 {
		t.Fatalf("verify after pagemap: %v", errs)
	}
	r, err := shard.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.GraphSizes(); err != nil {
		t.Fatalf("the graph-size index after pagemap: %v", err)
	}
	r.Close()
	if _, mapped, err := shard.AddPageMap(context.Background(), dir); err != nil || mapped != 0 {
		t.Fatalf("a mapped folder again: %d mapped, %v", mapped, err)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), ".*")); len(leftovers) > 0 {
		t.Fatalf("left behind: %v", leftovers)
	}
}

func sha256Sum(b []byte) [32]byte { return sha256.Sum256(b) }
