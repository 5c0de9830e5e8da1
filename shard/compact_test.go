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
			sched := scheduleOf(r, batches)
			for b, ids := range batches {
				for _, id := range ids {
					pinSameFor(t, eager, sched, b, id)
				}
				sched.ReleaseBatch(b)
			}
			st := r.Stats()
			if st.Compactions == 0 {
				t.Errorf("no page compacted: %+v", st)
			}
			if st.Loads > int64(pages)+int64(pages)/4+1 {
				t.Errorf("%d loads of %d pages: want at most %d", st.Loads, pages, pages+pages/4+1)
			}
			// Past its future: pages hold only what was still needed.
			sched.Close()
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

// scheduleOf hands r the future of a stream of batches, with no read
// ahead.
func scheduleOf(r *shard.Reader, batches [][]int64) *shard.Schedule {
	return r.Schedule(len(batches), func(b int, visit func(int64)) {
		for _, id := range batches[b] {
			visit(id)
		}
	}, nil, len(batches))
}

// pinSameFor pins graph id for batch b of sched and checks it against
// eager's.
func pinSameFor(t *testing.T, eager *shard.Reader, sched *shard.Schedule, b int, id int64) {
	t.Helper()
	want, err := eager.Graph(id)
	if err != nil {
		t.Fatal(err)
	}
	got, pin, err := sched.Pin(context.Background(), b, id)
	if err != nil {
		t.Fatal(err)
	}
	defer pin.Release(nil)
	if w, g := graphText(want), graphText(got); w != g {
		t.Fatalf("graph %d:\n got %s\nwant %s", id, g, w)
	}
}

// pinSame pins graph id in r and checks it against eager's.
func pinSame(t *testing.T, eager, r *shard.Reader, id int64) {
	t.Helper()
	want, err := eager.Graph(id)
	if err != nil {
		t.Fatal(err)
	}
	got, release, err := r.Pin(context.Background(), id)
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

// A graph compacted away from a page that another pin holds is served by a
// private read of the page: counted in the cache's use while held (and
// in Private), uncounted when released. Before, it was read and decoded
// outside the accounting (7.8 MB held under a 1.05 MB limit in a stress
// run).
func TestPrivateReadCounted(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 300, 3, 1<<20)
	eager, err := shard.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer eager.Close()
	biggest, _ := biggestPage(t, dir)
	r, err := shard.Open(context.Background(), dir, shard.WithCacheLimit(3*biggest+biggest/2))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	batches := windowedBatches(r, 4, 5, 1)
	sched := scheduleOf(r, batches)
	defer sched.Close()
	pageOf := func(id int64) int {
		pos := r.Manifest().PositionOf(id)
		for p := range r.NumPages() {
			if first, k := r.PageGraphs(p); pos >= first && pos < first+int64(k) {
				return p
			}
		}
		return -1
	}
	found := false
	for b, ids := range batches {
		for _, id := range ids {
			pinSameFor(t, eager, sched, b, id)
		}
		sched.ReleaseBatch(b)
		if found || b+1 >= len(batches) || r.Stats().Compactions == 0 {
			continue
		}
		// A graph the next batch needs (kept), held; then one of an
		// earlier batch on its page (compacted away, if the page was).
		for _, x := range batches[b+1] {
			for _, prev := range batches[:b+1] {
				for _, y := range prev {
					if found || pageOf(y) != pageOf(x) {
						continue
					}
					_, releaseX, err := r.Pin(context.Background(), x)
					if err != nil {
						t.Fatal(err)
					}
					gy, releaseY, err := r.Pin(context.Background(), y)
					if err != nil {
						t.Fatal(err)
					}
					held, text := r.Stats(), graphText(gy)
					releaseY()
					after := r.Stats()
					if held.Private == 1 {
						found = true
						// Counted while held: other pages made room (within the
						// limit), and releasing it uncounts it.
						if held.Used > held.Limit || after.Used >= held.Used || after.Private != 0 {
							t.Errorf("a private read: %d bytes used held (limit %d), %d after release, %d private left",
								held.Used, held.Limit, after.Used, after.Private)
						}
						want, _ := eager.Graph(y)
						if text != graphText(want) {
							t.Errorf("graph %d from a private read differs", y)
						}
					}
					releaseX()
				}
			}
		}
	}
	if !found {
		t.Fatal("no graph was compacted away from a page held by another pin: the test reached no private read")
	}
}

// A stream's future (4 bytes a graph of the set, and a little more a
// batch and a page) counts in the cache's use while handed over, and goes
// with it.
func TestFutureCounted(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 300, 3, 1<<20)
	r, err := shard.Open(context.Background(), dir, shard.WithCacheLimit(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	batches := windowedBatches(r, 4, 5, 1)
	before := r.Stats()
	sched := scheduleOf(r, batches)
	graphs := int64(r.NumGraphs())
	st := r.Stats()
	if st.Futures < 4*graphs || st.Futures > 4*graphs+16*int64(len(batches)+r.NumPages()) || st.Used != before.Used+st.Futures {
		t.Fatalf("handed over: %d future bytes (%d graphs, %d batches), %d used (%d before), want the future counted",
			st.Futures, graphs, len(batches), st.Used, before.Used)
	}
	sched.Close()
	if st := r.Stats(); st.Futures != 0 || st.Used != before.Used {
		t.Fatalf("handed back: %d future bytes, %d used, want %d", st.Futures, st.Used, before.Used)
	}
}
