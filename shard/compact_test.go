package shard_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/shard"
)

// Under a cache limit smaller than a window's pages, with the stream's
// graph future registered, the reader shrinks pages to the graphs still
// needed (and trims the graphs needed last) instead of dropping them:
// every graph pinned equals the eager reader's, in every column and code
// width, pages are compacted, and the pages are read little more than
// once each; a graph pinned after its future passed (compacted away) is
// read again whole and equal too.
func TestCompactionKeepsGraphs(t *testing.T) {
	mol := func(width int) string {
		dir := filepath.Join(t.TempDir(), "mol")
		o := v3Options(width)
		o.BatchGraphs = 40
		if _, err := writeMolecules(t, dir, o, 400); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	for _, tc := range []struct {
		name string
		dir  func() string
	}{
		{"collab", func() string { return fixture.SynthShardsSized(t, "COLLAB", 300, 3, 1<<20) }},
		{"mol-u8", func() string { return mol(1) }},
		{"mol-u16", func() string { return mol(2) }},
		{"mol-i32", func() string { return mol(4) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dir()
			eager, err := shard.Open(context.Background(), dir)
			if err != nil {
				t.Fatal(err)
			}
			defer eager.Close()
			pages := eager.NumPages()
			if pages < 6 {
				t.Fatalf("want at least 6 pages, got %d", pages)
			}
			biggest, _ := biggestPage(t, dir)
			// Windows of 4 pages, a cache of room for 3.5 of them.
			r, err := shard.Open(context.Background(), dir, shard.WithCacheLimit(3*biggest+biggest/2))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			batches := windowedBatches(r, 4, 5, 1)
			f := r.GraphFuture(len(batches), func(b int, visit func(int64)) {
				for _, id := range batches[b] {
					visit(id)
				}
			})
			done := r.Foresee(f)
			for b, ids := range batches {
				f.Advance(b)
				for _, id := range ids {
					pinSame(t, eager, r, id)
				}
				f.Built(b, func(visit func(int64)) {
					for _, id := range ids {
						visit(id)
					}
				})
			}
			f.Advance(len(batches))
			st := r.Stats()
			if st.Compactions == 0 {
				t.Errorf("no page compacted: %+v", st)
			}
			if st.Loads > int64(pages)+int64(pages)/4+1 {
				t.Errorf("%d loads of %d pages: want at most %d", st.Loads, pages, pages+pages/4+1)
			}
			// Past its future: pages hold only what was still needed.
			done()
			for id := range int64(eager.Manifest().Stats.Graphs) {
				pinSame(t, eager, r, id)
			}
		})
	}
}

// windowedBatches orders a folder's graphs by windows of w pages, each
// window's graphs shuffled, in batches of n.
func windowedBatches(r *shard.Reader, w, n int, seed uint64) [][]int64 {
	rng := rand.New(rand.NewPCG(seed, 9))
	var batches [][]int64
	for p0 := 0; p0 < r.NumPages(); p0 += w {
		var ids []int64
		for p := p0; p < min(p0+w, r.NumPages()); p++ {
			first, k := r.PageGraphs(p)
			for pos := first; pos < first+k; pos++ {
				ids = append(ids, r.Manifest().IDAt(pos))
			}
		}
		rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		for len(ids) > 0 {
			k := min(n, len(ids))
			batches = append(batches, ids[:k])
			ids = ids[k:]
		}
	}
	return batches
}

// pinSame pins graph id in r and checks it against eager's.
func pinSame(t *testing.T, eager, r *shard.Reader, id int64) {
	t.Helper()
	want, err := eager.Graph(id)
	if err != nil {
		t.Fatal(err)
	}
	got, release, err := r.Pin(id)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if w, g := graphText(want), graphText(got); w != g {
		t.Fatalf("graph %d:\n got %s\nwant %s", id, g, w)
	}
}

// graphText writes every column of g, floats by their bits (NaN targets)
// and codes widened, nil and empty alike.
func graphText(g shard.Graph) string {
	bits := func(x []float32) []uint32 {
		out := make([]uint32, len(x))
		for i, v := range x {
			out[i] = math.Float32bits(v)
		}
		return out
	}
	wide := func(c shard.Codes) []int32 { return c.AppendTo(nil) }
	return fmt.Sprint(g.ID, g.Label, g.NumNodes, slices.Clip(g.Edges), g.Codes, bits(g.X), g.EdgeLabels,
		wide(g.NodeCat), wide(g.EdgeCat), bits(g.EdgeX), bits(g.Targets))
}
