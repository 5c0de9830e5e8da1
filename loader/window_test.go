package loader_test

// The windowed shuffle under the loader: SubMix's partner stays in its
// window, resume is the stream's tail, and a window too small to pair is
// refused at start.

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/augloader/augloader/aug"
	"github.com/augloader/augloader/epoch"
	"github.com/augloader/augloader/internal/testkit/fixture"
	"github.com/augloader/augloader/loader"
	"github.com/augloader/augloader/shard"
	"github.com/augloader/augloader/wire"
)

// Under a windowed shuffle SubMix's partner is a graph of the target's
// window, and a resumed request is the tail of the full stream.
func TestWindowedShuffle(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 300, 2, 128<<10)
	// Three pages a window would leave a remainder window of one page, and
	// this folder has a page of one graph: refused (TestWindowTooSmallForSubMixRefusedAtStart).
	cfg := loader.Config{Workers: 2, Seed: 5, BatchSize: 8, Shuffle: epoch.Shuffle{Window: 4}}
	l := fixture.Loader(t, dir, nil, "submix:p=0.5", cfg)
	r, err := shard.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p, err := l.Plan(wire.Request{Epoch: 1, World: 1})
	if err != nil {
		t.Fatal(err)
	}
	mixed := 0
	if _, err := l.Stream(context.Background(), p, func(rec arrow.RecordBatch) error {
		// With four pages a window, every graph of a batch comes from
		// four pages, or eight when the batch straddles two windows (the
		// last window holds the remainder).
		ids := rec.Column(rec.Schema().FieldIndices("graph_id")[0]).(*array.Int64).Int64Values()
		pages := map[int]bool{}
		for _, id := range ids {
			pages[r.PageOf(id)] = true
		}
		if len(pages) > 8 {
			t.Errorf("a batch of a window:4 epoch draws from %d pages", len(pages))
		}
		mixed++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if mixed == 0 {
		t.Fatal("no batch")
	}
	// Every partner drawn is another graph of the target's window.
	win, err := epoch.WindowPermutation(5, 1, l.Source().Served(), r.NumPages(), 4, r.PageOf)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var into aug.Graph
	for w := 0; w+1 < len(win.Starts); w++ {
		part := win.Perm[win.Starts[w]:win.Starts[w+1]]
		for _, target := range part[:min(len(part), 10)] {
			for range 5 {
				if err := loader.WindowPartner(l.Source(), win, target, rng, &into); err != nil {
					t.Fatal(err)
				}
				if into.ID == target || !slices.Contains(part, into.ID) {
					t.Fatalf("graph %d (page %d) got partner %d (page %d) outside its window", target, r.PageOf(target), into.ID, r.PageOf(into.ID))
				}
			}
		}
	}
	_, full := stream(t, l, wire.Request{Epoch: 1, World: 1})
	_, tail := stream(t, l, wire.Request{Epoch: 1, World: 1, StartBatch: 5})
	if len(tail) != len(full)-5 {
		t.Fatalf("resumed: %d batches, want %d", len(tail), len(full)-5)
	}
	for i := range tail {
		if tail[i] != full[5+i] {
			t.Fatalf("resumed at 5: batch %d differs", 5+i)
		}
	}
}

// SubMix under a windowed shuffle is refused at start when some epoch's
// window could hold one served graph alone (it would cut that epoch
// midway: no partner), and served when none can.
func TestWindowTooSmallForSubMixRefusedAtStart(t *testing.T) {
	dir := fixture.SynthShardsSized(t, "COLLAB", 300, 2, 128<<10)
	r, err := shard.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.NumPages() < 3 {
		t.Fatalf("%d pages: the test needs several", r.NumPages())
	}
	// Every graph but one of page 0's: that page serves one graph.
	var lonely []int64
	first := true
	for id := int64(0); id < int64(r.NumGraphs()); id++ {
		if r.PageOf(id) == 0 {
			if !first {
				continue
			}
			first = false
		}
		lonely = append(lonely, id)
	}
	twins := fixture.Twins(t, "none / submix")
	// This folder's pages: 55 (55 % 3 = 1, 55 % 4 = 3), page 3 of one graph.
	if n := r.NumPages(); n%3 != 1 || n%4 != 3 {
		t.Fatalf("%d pages: the cases below assume 55", n)
	}
	for _, tc := range []struct {
		name    string
		served  []int64
		policy  string
		window  int
		twins   [][]*epoch.Schedule
		refused string // the page named; "" served
	}{
		{"window:4 leaves no window of one graph", nil, "submix", 4, nil, ""},
		{"window:3 leaves a last window of one page", nil, "submix", 3, nil, "page 3's one served graph"},
		{"window:1, a page of one served graph", lonely, "submix", 1, nil, "page 0's one served graph"},
		{"submix-base too", lonely, "submix-base", 1, nil, "page 0's one served graph"},
		{"a twin's submix", lonely, "nodesam", 1, twins, "page 0's one served graph"},
		{"no submix: no partner needed", lonely, "nodesam", 1, nil, ""},
		{"a window of one page of a served subset", lonely, "submix", 4, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := loader.NewSource(r, tc.served)
			if err != nil {
				t.Fatal(err)
			}
			sched, err := epoch.ParseSchedule(tc.policy)
			if err != nil {
				t.Fatal(err)
			}
			cfg := loader.Config{Workers: 2, Seed: 5, BatchSize: 8, Schedule: sched, Shuffle: epoch.Shuffle{Window: tc.window}, Twins: tc.twins}
			l, err := loader.New(src, cfg)
			if tc.refused != "" {
				if !errors.Is(err, epoch.ErrShuffle) || !strings.Contains(err.Error(), tc.refused) || !strings.Contains(err.Error(), "--shuffle window:") {
					t.Fatalf("err = %v, want the window refused naming %s and a window that works", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// Served: every epoch of a few is whole.
			for e := uint64(0); e < 4; e++ {
				stream(t, l, wire.Request{Epoch: e, World: 1})
			}
		})
	}
}
