package shard_test

import (
	"context"
	"testing"
	"time"

	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/shard"
)

// belady counts the page loads of Belady's rule (evict the page needed
// farthest ahead) over seq with room for k pages: the fewest any cache of
// k pages can do without reading ahead.
func belady(seq []int, k int) int {
	loads := 0
	held := map[int]bool{}
	for i, p := range seq {
		if held[p] {
			continue
		}
		loads++
		if len(held) == k {
			victim, far := -1, -1
			for q := range held {
				next := len(seq) + q // never again: farthest, ties by page
				for j := i + 1; j < len(seq); j++ {
					if seq[j] == q {
						next = j
						break
					}
				}
				if next > far {
					victim, far = q, next
				}
			}
			delete(held, victim)
		}
		held[p] = true
	}
	return loads
}

// With a stream's future registered, a reader whose cache holds k pages
// loads each page as often as Belady's rule does over the same order: the
// fewest a cache of that size allows. Without it (recency), the same
// order over a set just larger than the cache loads far more.
func TestForesightLoads(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 600, 3, 1<<20)
	biggest, pages := biggestPage(t, dir)
	if pages < 5 {
		t.Fatalf("want at least 5 pages, got %d", pages)
	}
	// An order cycling over 5 pages, one graph of each per step: the
	// order on which recency misses every time a cache of 3 pages.
	var seq []int
	for i := range 200 {
		seq = append(seq, i%5)
	}
	run := func(foresee bool) int64 {
		// Room for 3 pages of the 5, whatever their exact decoded sizes.
		r, err := shard.Open(context.Background(), dir, shard.WithCacheLimit(3*biggest+biggest/2))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if foresee {
			f := shard.NewFuture(r.NumPages(), len(seq), func(b int, visit func(int)) { visit(seq[b]) })
			defer r.Foresee(f)()
			for b, p := range seq {
				f.Advance(b)
				first, _ := r.PageGraphs(p)
				_, rel, err := r.Pin(r.Manifest().IDAt(first))
				if err != nil {
					t.Fatal(err)
				}
				rel()
			}
		} else {
			for _, p := range seq {
				first, _ := r.PageGraphs(p)
				_, rel, err := r.Pin(r.Manifest().IDAt(first))
				if err != nil {
					t.Fatal(err)
				}
				rel()
			}
		}
		return r.Stats().Loads
	}
	min := belady(seq, 3)
	t.Logf("%d steps over 5 pages, room for 3: Belady %d loads", len(seq), min)
	if got := run(true); got != int64(min) {
		t.Errorf("with the future: %d loads, Belady's rule %d", got, min)
	}
	if got := run(false); got != int64(len(seq)) {
		t.Errorf("by recency: %d loads, want the cliff: a load at each of the %d steps", got, len(seq))
	}
	if min >= len(seq)*3/5 {
		t.Errorf("Belady's rule loads %d times in %d steps: the order is not one where foresight helps", min, len(seq))
	}
}

// With a future, a read ahead displaces only pages needed later than the
// one it reads, and a page no stream needs is not read ahead.
func TestForesightPrefetch(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 600, 3, 1<<20)
	biggest, _ := biggestPage(t, dir)
	r, err := shard.Open(context.Background(), dir, shard.WithCacheLimit(2*biggest+biggest/2))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	seq := []int{0, 1, 0, 1, 2}
	f := shard.NewFuture(r.NumPages(), len(seq), func(b int, visit func(int)) { visit(seq[b]) })
	defer r.Foresee(f)()
	touch := func(p int) {
		first, _ := r.PageGraphs(p)
		_, rel, err := r.Pin(r.Manifest().IDAt(first))
		if err != nil {
			t.Fatal(err)
		}
		rel()
	}
	touch(0)
	touch(1)
	settle := func() shard.CacheStats {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			st := r.Stats()
			if st.Prefetches == 0 || st.Loads >= 2+st.Prefetches || time.Now().After(deadline) {
				return st
			}
		}
	}
	r.Prefetch(2) // needed at 4, after 0 (at 2) and 1 (at 3): no room
	r.Prefetch(3) // never needed
	if st := settle(); st.Prefetches != 0 || st.Resident != 2 {
		t.Fatalf("read ahead over pages needed sooner, or a page none needs: %+v", st)
	}
	f.Advance(4) // 0 and 1 are past
	r.Prefetch(2)
	if st := settle(); st.Prefetches != 1 || st.Loads != 3 {
		t.Fatalf("page 2, needed next, was not read ahead once 0 and 1 were past: %+v", st)
	}
}

// biggestPage is the largest estimated decoded page of the folder dir,
// and its page count.
func biggestPage(t *testing.T, dir string) (int64, int) {
	t.Helper()
	r, err := shard.Open(context.Background(), dir, shard.WithCacheLimit(1<<40))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var biggest int64
	for _, b := range r.PageBytes() {
		biggest = max(biggest, b)
	}
	return biggest, r.NumPages()
}
